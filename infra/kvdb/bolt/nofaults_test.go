//go:build !faults

package bolt

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

// A binary without the faults tag refuses the stall variable: a process
// test that asks for stalls never passes without them.
func TestStallEnvIsRefusedWithoutTheFaultsTag(t *testing.T) {
	g := NewWithT(t)
	env := map[string]string{StallEnv: "1,10ms,10ms"}
	p := NewPlugin(UseConf(testConfig(t)), UseEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }),
		UseDeps(func(d *Deps) { d.Cfg, d.Log = config.NoFile, testLogger(t) }))
	err := p.Init()
	g.Expect(err).To(MatchError(And(ContainSubstring(StallEnv), ContainSubstring(`"1,10ms,10ms"`),
		ContainSubstring("-tags faults"))))
	g.Expect(p.Close()).To(Succeed())
}
