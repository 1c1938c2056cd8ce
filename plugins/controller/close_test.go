package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// updateRefusingSouthbound accepts resyncs and refuses every update
// commit, signalling each attempt on attempts.
type updateRefusingSouthbound struct {
	*MemSouthbound
	attempts chan uint64 // seq of each refused commit
}

func (s *updateRefusingSouthbound) Commit(ctx context.Context, c Commit) error {
	if c.Resync {
		return s.MemSouthbound.Commit(ctx, c)
	}
	s.attempts <- c.SeqNum
	return errors.New("southbound refused")
}

// Close must not wait for a commit retry: with a one-hour retry delay it
// returns, and the event waiting to retry fails.
func TestCloseInterruptsCommitRetries(t *testing.T) {
	g := NewWithT(t)
	sb := &updateRefusingSouthbound{MemSouthbound: NewMemSouthbound(), attempts: make(chan uint64, 16)}
	cfg := testConfig()
	cfg.EnableRetry, cfg.MaxRetryAttempts, cfg.DelayRetry = true, 3, time.Hour
	p := NewPlugin()
	p.Southbound, p.metrics = sb, newLoopMetrics()
	p.EventHandlers = []api.EventHandler{newHandler("a", &journal{})}
	p.loop = newEventLoop(cfg, p.EventHandlers, sb, discardLog(), p)
	p.loop.start()
	g.Expect(p.PushEvent(dbResync())).To(Succeed())
	ev := newEvent("stuck", api.BestEffort)
	g.Expect(p.PushEvent(ev)).To(Succeed())
	var seq uint64
	g.Eventually(sb.attempts, 10*time.Second).Should(Receive(&seq), "the first commit attempt")
	g.Expect(seq).To(Equal(uint64(2)))

	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	var closeErr error
	g.Eventually(closed, 20*time.Second).Should(Receive(&closeErr), "Close returns although a retry is an hour away")
	// Shutdown's own commit is refused too, and not retried.
	g.Expect(closeErr).To(MatchError(ContainSubstring("shutdown event: commit: southbound refused")))
	err := ev.wait(t)
	g.Expect(err).To(MatchError(api.ErrClosedController))
	g.Expect(err).To(MatchError(ContainSubstring("southbound refused; retry 1 of 3 abandoned")))
	g.Expect(p.EventHistory()[1].TxnError).To(Equal(err.Error()), "recorded in the history")
}
