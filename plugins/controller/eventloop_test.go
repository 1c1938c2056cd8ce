package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

func TestEventsWaitForTheFirstDBResyncAndReplayAfterIt(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	l, obs := startLoop(t, testConfig(), nil, newHandler("a", j))
	early := newEvent("early", api.BestEffort)
	g.Expect(l.PushEvent(early)).To(Succeed())
	g.Consistently(obs.eventNames, 100*time.Millisecond).Should(BeEmpty(), "nothing runs before the DB resync")

	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	g.Expect(early.wait(t)).To(Succeed())
	g.Expect(obs.eventNames()).To(Equal([]string{api.DBResyncName, "early"}))
	g.Expect(j.list()[0]).To(Equal(call{"a", "Resync", api.DBResyncName, 1}))
	started, fatal := obs.state()
	g.Expect(started).To(BeTrue())
	g.Expect(fatal).NotTo(HaveOccurred())
}

func TestHandlerOrderFollowsTheDirection(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	l, _ := startLoop(t, testConfig(), nil, newHandler("a", j), newHandler("b", j), newHandler("c", j))
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	fwd := newEvent("fwd", api.BestEffort)
	rev := newEvent("rev", api.BestEffort)
	rev.dir = api.Reverse
	g.Expect(l.PushEvent(fwd)).To(Succeed())
	g.Expect(l.PushEvent(rev)).To(Succeed())
	g.Expect(fwd.wait(t)).To(Succeed())
	g.Expect(rev.wait(t)).To(Succeed())
	g.Expect(j.names(api.DBResyncName)).To(Equal([]string{"a.Resync", "b.Resync", "c.Resync"}))
	g.Expect(j.names("fwd")).To(Equal([]string{"a.Update", "b.Update", "c.Update"}))
	g.Expect(j.names("rev")).To(Equal([]string{"c.Update", "b.Update", "a.Update"}))
}

func TestKubeStateChangeDeleteIsReverseAndPatchesTheState(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	a, b := newHandler("a", j), newHandler("b", j)
	l, obs := startLoop(t, testConfig(), nil, a, b)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	del := &api.KubeStateChange{Key: "k8s/node/n1", Resource: "node", PrevValue: wrapperspb.String("n1")}
	g.Expect(l.PushEvent(del)).To(Succeed())
	g.Eventually(obs.eventNames).Should(HaveLen(2))
	g.Expect(j.names(api.KubeStateChangeName)).To(Equal([]string{"b.Update", "a.Update"}))
	// The next resync sees the node gone: a puts the state size.
	g.Expect(l.PushEvent(&api.HealingResync{Type: api.AfterError, Error: errors.New("x")})).To(Succeed())
	g.Eventually(obs.eventNames).Should(HaveLen(3))
	g.Expect(l.sb.Dump()["a/resync"]).To(Satisfy(func(v any) bool {
		return valueOf(v.(*wrapperspb.Int64Value)) == `"0"`
	}))
}

func TestRevertOnFailureRevertsEarlierHandlersAndCommitsNothing(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	a, b, c := newHandler("a", j), newHandler("b", j), newHandler("c", j)
	sb := NewMemSouthbound()
	l, obs := startLoop(t, testConfig(), sb, a, b, c)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	b.setFail("Update", errors.New("b cannot"))
	ev := newEvent("add", api.RevertOnFailure)
	g.Expect(l.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(MatchError(ContainSubstring("handler b: b cannot")))
	g.Expect(j.names("add")).To(Equal([]string{"a.Update", "b.Update", "a.Revert"}), "c never runs; a is reverted")
	g.Expect(sb.Dump()).NotTo(HaveKey("a/add"), "nothing of the event committed")
	rec := obs.list()[1]
	g.Expect(rec.Handlers).To(HaveLen(3))
	g.Expect(rec.Handlers[2]).To(Equal(HandlerRecord{Handler: "a", Revert: true}))
	g.Consistently(obs.eventNames, 100*time.Millisecond).Should(HaveLen(2), "a clean revert needs no healing")
}

func TestRevertOnFailureRevertsEveryHandlerWhenTheCommitFails(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	sb := &failingSouthbound{MemSouthbound: NewMemSouthbound()}
	cfg := testConfig()
	l, obs := startLoop(t, cfg, sb, newHandler("a", j), newHandler("b", j))
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	g.Eventually(obs.eventNames).Should(HaveLen(1))
	sb.mu.Lock()
	sb.fails = 1 + cfg.MaxRetryAttempts
	sb.mu.Unlock()
	ev := newEvent("add", api.RevertOnFailure)
	g.Expect(l.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(MatchError(ContainSubstring("southbound refused")))
	g.Expect(j.names("add")).To(Equal([]string{"a.Update", "b.Update", "b.Revert", "a.Revert"}))
	sb.mu.Lock()
	defer sb.mu.Unlock()
	g.Expect(sb.calls).To(Equal(2+cfg.MaxRetryAttempts), "resync commit + 1 try + retries")
}

func TestCommitIsRetried(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	sb := &failingSouthbound{MemSouthbound: NewMemSouthbound()}
	l, obs := startLoop(t, testConfig(), sb, newHandler("a", j))
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	g.Eventually(obs.eventNames).Should(HaveLen(1))
	sb.mu.Lock()
	sb.fails = 1
	sb.mu.Unlock()
	ev := newEvent("add", api.BestEffort)
	g.Expect(l.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(Succeed(), "the retry succeeded")
	g.Expect(sb.Dump()).To(HaveKey("a/add"))
}

func TestBestEffortFailureSchedulesAHealingResync(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	a, b := newHandler("a", j), newHandler("b", j)
	l, obs := startLoop(t, testConfig(), nil, a, b)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	a.setFail("Update", errors.New("a failed"))
	ev := newEvent("upd", api.BestEffort)
	g.Expect(l.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(HaveOccurred())
	g.Expect(j.names("upd")).To(Equal([]string{"a.Update", "b.Update"}), "best effort goes on")
	g.Eventually(obs.eventNames).Should(Equal([]string{api.DBResyncName, "upd", api.HealingResyncName}))
	g.Expect(j.names(api.HealingResyncName)).To(Equal([]string{"a.Resync", "b.Resync"}))
	g.Expect(j.list()[len(j.list())-1].resyncCount).To(Equal(2))
	g.Expect(obs.list()[2].Method).To(Equal(api.FullResync))
}

func TestIgnoreErrorsNeverHeals(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	a := newHandler("a", j)
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	a.setFail("Update", errors.New("a failed"))
	ev := newEvent("upd", api.BestEffortIgnoreErrors)
	g.Expect(l.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(HaveOccurred())
	g.Consistently(obs.eventNames, 150*time.Millisecond).Should(HaveLen(2))
}

func TestFailedHealingResyncIsFatal(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	a := newHandler("a", j)
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	a.setFail("Update", errors.New("update failed"))
	a.setFail("Resync", errors.New("resync failed"))
	g.Expect(l.PushEvent(newEvent("upd", api.BestEffort))).To(Succeed())
	g.Eventually(func() error { _, f := obs.state(); return f }).Should(MatchError(ContainSubstring("healing resync failed")))
	g.Expect(l.PushEvent(newEvent("late", api.BestEffort))).To(MatchError(api.ErrClosedController))
}

func TestFatalErrorStopsTheLoopAndFailsPendingEvents(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	a := newHandler("a", j)
	release := make(chan struct{})
	a.onEvent = func(ev api.Event, _ api.UpdateOperations) error {
		if ev.GetName() == "boom" {
			<-release
			return api.NewFatalError(errors.New("disk on fire"))
		}
		return nil
	}
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	boom, after := newEvent("boom", api.BestEffort), newEvent("after", api.BestEffort)
	g.Expect(l.PushEvent(boom)).To(Succeed())
	g.Expect(l.PushEvent(after)).To(Succeed())
	close(release)
	g.Expect(boom.wait(t)).To(MatchError(ContainSubstring("disk on fire")))
	g.Expect(after.wait(t)).To(MatchError(ContainSubstring("event loop is aborting after a fatal error")))
	_, fatal := obs.state()
	g.Expect(api.IsFatal(fatal)).To(BeTrue())
	g.Expect(l.PushEvent(newEvent("late", api.BestEffort))).To(MatchError(api.ErrClosedController))
	g.Expect(j.names("after")).To(BeEmpty())
}

func TestAbortStopsOneEventWithoutHealing(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	a, b := newHandler("a", j), newHandler("b", j)
	sb := NewMemSouthbound()
	l, obs := startLoop(t, testConfig(), sb, a, b)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	a.setFail("Update", api.NewAbortEventError(errors.New("not now")))
	ev := newEvent("upd", api.BestEffort)
	g.Expect(l.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(Satisfy(api.IsAbort))
	g.Expect(j.names("upd")).To(Equal([]string{"a.Update"}), "b is skipped")
	g.Expect(sb.Dump()).NotTo(HaveKey("a/upd"))
	g.Consistently(obs.eventNames, 150*time.Millisecond).Should(HaveLen(2), "no healing")
	_, fatal := obs.state()
	g.Expect(fatal).NotTo(HaveOccurred(), "abort is not fatal")
	next := newEvent("next", api.BestEffort)
	a.setFail("Update", nil)
	g.Expect(l.PushEvent(next)).To(Succeed())
	g.Expect(next.wait(t)).To(Succeed())
}

func TestFullQueueRefusesThePush(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig()
	cfg.EventQueueSize = 2
	l := newEventLoop(cfg, nil, NewMemSouthbound(), discardLog(), newObserver()) // not started
	g.Expect(l.PushEvent(newEvent("1", api.BestEffort))).To(Succeed())
	g.Expect(l.PushEvent(newEvent("2", api.BestEffort))).To(Succeed())
	g.Expect(l.PushEvent(newEvent("3", api.BestEffort))).To(MatchError(api.ErrEventQueueFull))
}

// PushEventWait waits for room in a full queue: the event gets in as soon
// as the loop takes one; the wait ends with the context or when the loop
// closes, and an event queued by a waiting push is never left behind.
func TestPushEventWaitWaitsForRoom(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig()
	cfg.EventQueueSize = 1
	l := newEventLoop(cfg, []api.EventHandler{newHandler("a", &journal{})}, NewMemSouthbound(), discardLog(), newObserver())
	g.Expect(l.PushEvent(dbResync())).To(Succeed()) // fills the queue; the loop is not started yet

	waited := newEvent("waited", api.BestEffort)
	pushed := make(chan error, 1)
	go func() { pushed <- l.PushEventWait(context.Background(), waited) }()
	g.Consistently(pushed).WithTimeout(50*time.Millisecond).ShouldNot(Receive(), "waits while the queue is full")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Expect(l.PushEventWait(ctx, newEvent("cancelled", api.BestEffort))).To(MatchError(context.Canceled))

	l.start()
	t.Cleanup(l.stop)
	g.Eventually(pushed).Should(Receive(BeNil()), "in once the loop took the resync")
	g.Expect(waited.wait(t)).To(Succeed())
}

// A push waiting for room ends when the loop closes (here after a fatal
// error), and the event that filled the queue is failed, not forgotten.
func TestPushEventWaitEndsWhenTheLoopCloses(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig()
	cfg.EventQueueSize = 1
	a := newHandler("a", &journal{})
	release := make(chan struct{})
	a.onEvent = func(ev api.Event, _ api.UpdateOperations) error {
		if ev.GetName() != "busy" {
			return nil
		}
		<-release
		return api.NewFatalError(errors.New("broken"))
	}
	l, _ := startLoop(t, cfg, nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	g.Expect(l.PushEventWait(context.Background(), newEvent("busy", api.BestEffort))).To(Succeed())
	filler := newEvent("filler", api.BestEffort)
	g.Expect(l.PushEventWait(context.Background(), filler)).To(Succeed(), "room once busy is taken")

	pushed := make(chan error, 1)
	go func() { pushed <- l.PushEventWait(context.Background(), newEvent("waiting", api.BestEffort)) }()
	g.Consistently(pushed).WithTimeout(50*time.Millisecond).ShouldNot(Receive(), "the queue is full")
	close(release)
	g.Eventually(pushed).Should(Receive(MatchError(api.ErrClosedController)))
	g.Expect(filler.wait(t)).To(MatchError(api.ErrClosedController))
	g.Expect(l.PushEventWait(context.Background(), newEvent("late", api.BestEffort))).To(MatchError(api.ErrClosedController))
}

func TestBlockingPushReturnsTheOutcome(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	a := newHandler("a", j)
	l, _ := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	a.setFail("Update", errors.New("no"))
	ev := newEvent("blocking", api.BestEffortIgnoreErrors)
	ev.blocking = true
	g.Expect(l.PushEvent(ev)).To(MatchError(ContainSubstring("handler a: no")))
}

func TestNoStartupResyncWithinTheDeadlineIsFatal(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig()
	cfg.StartupResyncDeadline = 50 * time.Millisecond
	l, obs := startLoop(t, cfg, nil, newHandler("a", &journal{}))
	waiting := newEvent("waiting", api.BestEffort)
	g.Expect(l.PushEvent(waiting)).To(Succeed())
	g.Expect(waiting.wait(t)).To(MatchError(ContainSubstring("no DB resync within startupResyncDeadline 50ms")))
	_, fatal := obs.state()
	g.Expect(fatal).To(MatchError(ContainSubstring("startupResyncDeadline")))
}

func TestShutdownIsProcessedEvenBeforeStartup(t *testing.T) {
	g := NewWithT(t)
	j := &journal{}
	l, _ := startLoop(t, testConfig(), nil, newHandler("a", j), newHandler("b", j))
	g.Expect(l.PushEvent(&api.Shutdown{})).To(Succeed())
	g.Expect(j.names(api.ShutdownName)).To(Equal([]string{"b.Update", "a.Update"}))
}

func TestHandlerPanicIsFatal(t *testing.T) {
	g := NewWithT(t)
	a := newHandler("a", &journal{})
	a.onEvent = func(api.Event, api.UpdateOperations) error { panic("bug") }
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	ev := newEvent("p", api.BestEffort)
	g.Expect(l.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(MatchError(ContainSubstring("handler a panicked: bug")))
	// The event completes just before the loop reports the fatal state.
	g.Eventually(func() error { _, fatal := obs.state(); return fatal }).Should(HaveOccurred())
}

func TestPeriodicHealingReappliesTheDesiredConfig(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig()
	cfg.EnablePeriodicHealing = true
	cfg.PeriodicHealingInterval = 30 * time.Millisecond
	cfg.EnableVerification = true
	sb := NewMemSouthbound()
	j := &journal{}
	l, obs := startLoop(t, cfg, sb, newHandler("a", j))
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	g.Eventually(func() int { return len(obs.list()) }).Should(BeNumerically(">=", 2))
	// Tamper with the southbound: the next periodic healing restores it.
	g.Expect(sb.Commit(t.Context(), Commit{Resync: true})).To(Succeed())
	g.Eventually(sb.Dump).Should(HaveKey("a/resync"))
	g.Expect(j.names(api.HealingResyncName)).To(BeEmpty(), "downstream resync calls no handler")
	for _, r := range obs.list() {
		if r.Name == api.HealingResyncName {
			g.Expect(r.Method).To(Equal(api.DownstreamResync))
		}
	}
}

func TestVerificationRecordsADifference(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig()
	cfg.EnableVerification = true
	sb := NewMemSouthbound()
	l, obs := startLoop(t, cfg, sb, newHandler("a", &journal{}))
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	g.Eventually(obs.eventNames).Should(HaveLen(1))
	g.Expect(obs.list()[0].VerificationError).To(BeEmpty())
	g.Expect(sb.Commit(t.Context(), Commit{Values: map[string]proto.Message{"stray": wrapperspb.Bool(true)}})).To(Succeed())
	ev := newEvent("e", api.BestEffort)
	g.Expect(l.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(Succeed())
	g.Eventually(obs.eventNames).Should(HaveLen(2))
	g.Expect(obs.list()[1].VerificationError).To(ContainSubstring("stray"))
}
