//go:build faults

package bolt

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
)

func stallPlugin(t *testing.T, spec string) *Plugin {
	env := map[string]string{StallEnv: spec}
	return NewPlugin(UseConf(testConfig(t)), UseEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }),
		UseDeps(func(d *Deps) { d.Cfg, d.Log = config.NoFile, testLogger(t) }))
}

func TestStallSpecIsChecked(t *testing.T) {
	for _, spec := range []string{"0.5", "0,1ms,2ms", "1.5,1ms,2ms", "x,1ms,2ms", "0.5,2ms,1ms", "0.5,-1ms,1ms", "0.5,1ms,soon"} {
		p := stallPlugin(t, spec)
		NewWithT(t).Expect(p.Init()).To(MatchError(And(ContainSubstring(StallEnv), ContainSubstring(spec))), spec)
		_ = p.Close()
	}
}

// A stalled commit behaves as a slow disk does: the write it has taken
// lands after its caller gave up (unknown outcome, settled by a read the
// store orders after it), the one queued behind it is withdrawn.
func TestStalledCommitLandsLateAndWithdrawsTheQueue(t *testing.T) {
	g := NewWithT(t)
	stalled := stallsBegun.Load() // the counter is the process's
	p := stallPlugin(t, "1,300ms,300ms")
	g.Expect(p.Init()).To(Succeed())
	defer func() { g.Expect(p.Close()).To(Succeed()) }()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	taken := make(chan error, 1)
	go func() { taken <- p.Put(ctx, "/taken", []byte("1")) }()
	g.Eventually(stallsBegun.Load).Should(Equal(stalled+1), "the commit holding the first write stalls")
	queued := p.Put(ctx, "/queued", []byte("2"))
	g.Expect(<-taken).To(MatchError(kvdb.ErrUnknownOutcome))
	g.Expect(queued).To(MatchError(context.DeadlineExceeded))
	g.Expect(queued).NotTo(MatchError(kvdb.ErrUnknownOutcome))

	kv, found, err := p.Get(context.Background(), "/taken")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "the stalled commit applies its write after the caller gave up")
	g.Expect(string(kv.Value)).To(Equal("1"))
	_, found, err = p.Get(context.Background(), "/queued")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "a withdrawn write is never applied")
}
