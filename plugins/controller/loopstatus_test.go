package controller

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// fakeClock is a settable clock for the loop.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The loop's health: init before the first DB resync, ok after, error
// while one event has been processing longer than the stuck timeout (and
// ok again when it ends), error for good after a fatal error.
func TestLoopHealth(t *testing.T) {
	g := NewWithT(t)
	const stuckAfter = time.Minute
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	a := newHandler("a", &journal{})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	a.onEvent = func(ev api.Event, _ api.UpdateOperations) error {
		switch ev.GetName() {
		case "slow":
			entered <- struct{}{}
			<-release
		case "fatal":
			return api.NewFatalError(errors.New("state lost"))
		}
		return nil
	}
	l := newEventLoop(testConfig(), []api.EventHandler{a}, NewMemSouthbound(), discardLog(), newObserver())
	l.now = clock.now
	l.start()
	t.Cleanup(l.stop)
	probe := func() (health.State, error) { return l.health(clock.now(), stuckAfter) }

	g.Expect(probe()).To(Equal(health.Init))
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	g.Eventually(probe).Should(Equal(health.OK))

	slow := newEvent("slow", api.BestEffort)
	g.Expect(l.PushEvent(slow)).To(Succeed())
	g.Eventually(entered).Should(Receive())
	clock.advance(stuckAfter)
	g.Expect(probe()).To(Equal(health.OK), "exactly the timeout is not stuck yet")
	clock.advance(time.Second)
	state, err := probe()
	g.Expect(state).To(Equal(health.Error))
	g.Expect(err).To(MatchError(errLoopStuck))
	g.Expect(err).To(MatchError(ContainSubstring("(slow event) processing for 1m1s, more than stuckEventTimeout 1m0s")))
	close(release)
	g.Expect(slow.wait(t)).To(Succeed())
	g.Eventually(probe).Should(Equal(health.OK), "unstuck")

	g.Expect(l.runnable()).To(Succeed())
	fatal := newEvent("fatal", api.BestEffort)
	g.Expect(l.PushEvent(fatal)).To(Succeed())
	g.Expect(fatal.wait(t)).To(HaveOccurred())
	_, err = probe()
	g.Expect(err).To(MatchError(ContainSubstring("state lost")), "recorded before the event was answered")
	g.Expect(l.runnable()).To(MatchError(api.ErrClosedController))
	g.Expect(l.runnable()).To(MatchError(ContainSubstring("state lost")))
}

// POST /controller/resync with the loop stopped by a fatal error answers
// 503 naming the error, and dispatches nothing.
func TestResyncAnswers503WhenTheLoopIsDead(t *testing.T) {
	g := NewWithT(t)
	p, srv, w := restPlugin(t)
	g.Expect(p.PushEvent(dbResync())).To(Succeed())
	h := p.EventHandlers[0].(*testHandler)
	h.setFail("Update", api.NewFatalError(errors.New("allocations lost")))
	ev := newEvent("fatal", api.BestEffort)
	// The loop records why it stopped before it answers the event: a POST
	// made at the moment the event is answered (its Done, on the loop's
	// goroutine) is already refused.
	var atDone struct {
		status int
		body   string
	}
	ev.onDone = func(error) { atDone.status, atDone.body = srv.Post(ResyncPath, "") }
	before := w.resyncs.Load()
	g.Expect(p.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(HaveOccurred())
	g.Expect(atDone.status).To(Equal(http.StatusServiceUnavailable), atDone.body)

	status, body := srv.Post(ResyncPath, "")
	g.Expect(status).To(Equal(http.StatusServiceUnavailable))
	g.Expect(body).To(ContainSubstring(`"error": "resync cannot run: event loop stopped by a fatal error`))
	g.Expect(body).To(ContainSubstring("allocations lost"))
	g.Expect(w.resyncs.Load()).To(Equal(before), "a refused resync dispatches nothing")
}
