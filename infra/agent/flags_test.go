package agent_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/logging"
)

// confPlugin reads its config file in Init like every real plugin.
type confPlugin struct {
	infra.PluginDeps
	Value string `json:"value"`
}

func (p *confPlugin) Init() error {
	_, err := p.Cfg.LoadValue(p)
	return err
}

func newConfPlugin(name string) *confPlugin {
	p := &confPlugin{}
	p.SetName(name)
	p.LogRegistry = logging.NewRegistry(logging.WithOutput(discard{}))
	p.Setup()
	return p
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

func TestAgentWiresConfigFlags(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "one.conf"), []byte("value: from-dir\n"), 0o600)).To(Succeed())
	explicit := filepath.Join(dir, "explicit.yaml")
	g.Expect(os.WriteFile(explicit, []byte("value: from-flag\n"), 0o600)).To(Succeed())

	one, two := newConfPlugin("one"), newConfPlugin("two")
	a, err := agent.NewAgent(agent.Plugins(one, two), quiet(), agent.QuitSignals(),
		agent.FlagSet(flag.NewFlagSet("t", flag.ContinueOnError)),
		agent.Args([]string{"-config-dir", dir, "-two-config", explicit}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Start()).To(Succeed())
	defer a.Stop()
	g.Expect(one.Value).To(Equal("from-dir"))
	g.Expect(two.Value).To(Equal("from-flag"))
	g.Expect(a.FlagSet().Lookup("one-config")).NotTo(BeNil())
}

func TestAgentRejectsUnknownFlagAndBadConfig(t *testing.T) {
	g := NewWithT(t)
	_, err := agent.NewAgent(agent.Plugins(newConfPlugin("p")), quiet(),
		agent.FlagSet(flag.NewFlagSet("t", flag.ContinueOnError)), agent.Args([]string{"-nope"}))
	g.Expect(err).To(MatchError(ContainSubstring("flag provided but not defined: -nope")))

	dir := t.TempDir()
	bad := filepath.Join(dir, "p.conf")
	g.Expect(os.WriteFile(bad, []byte("valeu: x\n"), 0o600)).To(Succeed())
	a, err := agent.NewAgent(agent.Plugins(newConfPlugin("p")), quiet(), agent.QuitSignals(),
		agent.FlagSet(flag.NewFlagSet("t", flag.ContinueOnError)), agent.Args([]string{"-p-config", bad}))
	g.Expect(err).NotTo(HaveOccurred())
	err = a.Start()
	g.Expect(err).To(MatchError(ContainSubstring(`plugin p: init`)))
	g.Expect(err).To(MatchError(ContainSubstring(`unknown key "valeu"`)))
}
