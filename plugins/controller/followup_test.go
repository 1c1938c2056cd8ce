package controller

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// A follow-up pushed by a handler runs right after its event, before an
// event another goroutine queued earlier; a blocking one is refused.
func TestFollowUpsRunBeforeQueuedEvents(t *testing.T) {
	g := NewWithT(t)
	a := newHandler("a", &journal{})
	release := make(chan struct{})
	var followErr, blockingErr error
	a.onEvent = func(ev api.Event, txn api.UpdateOperations) error {
		if ev.GetName() == "first" {
			<-release
			followErr = txn.PushFollowUp(newEvent("follow-up", api.BestEffort))
			blocking := newEvent("blocking", api.BestEffort)
			blocking.blocking = true
			blockingErr = txn.PushFollowUp(blocking)
		}
		return nil
	}
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	first, queued := newEvent("first", api.BestEffort), newEvent("queued", api.BestEffort)
	g.Expect(l.PushEvent(first)).To(Succeed())
	g.Expect(l.PushEvent(queued)).To(Succeed()) // queued while first runs
	close(release)
	g.Expect(queued.wait(t)).To(Succeed())
	g.Expect(followErr).NotTo(HaveOccurred())
	g.Expect(blockingErr).To(MatchError(api.ErrBlockingFollowUp))
	g.Expect(obs.eventNames()).To(Equal([]string{api.DBResyncName, "first", "follow-up", "queued"}))
	recs := obs.list()
	g.Expect(recs[2].IsFollowUp).To(BeTrue())
	g.Expect(recs[2].FollowUpTo).To(Equal(recs[1].SeqNum))
	g.Expect(recs[3].IsFollowUp).To(BeFalse())
}

// Follow-ups come from Resync as well as from Update; follow-ups of a
// follow-up run after its siblings, each recorded with its parent.
func TestFollowUpsFromResyncAndUpdate(t *testing.T) {
	g := NewWithT(t)
	a := newHandler("a", &journal{})
	pushed := map[string]error{}
	push := func(txn api.ResyncOperations, name string) {
		pushed[name] = txn.PushFollowUp(newEvent(name, api.BestEffort))
	}
	a.onResync = func(ev api.Event, txn api.ResyncOperations) error {
		if ev.GetName() == api.DBResyncName {
			push(txn, "from-resync-1")
			push(txn, "from-resync-2")
		}
		return nil
	}
	a.onEvent = func(ev api.Event, txn api.UpdateOperations) error {
		if ev.GetName() == "from-resync-1" {
			push(txn, "from-update")
		}
		return nil
	}
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	last := newEvent("last", api.BestEffort)
	g.Expect(l.PushEvent(last)).To(Succeed())
	g.Expect(last.wait(t)).To(Succeed())
	g.Expect(pushed).To(HaveLen(3))
	for name, err := range pushed {
		g.Expect(err).NotTo(HaveOccurred(), name)
	}
	g.Expect(obs.eventNames()).To(Equal([]string{
		api.DBResyncName, "from-resync-1", "from-resync-2", "from-update", "last"}))
	recs := obs.list()
	g.Expect(recs[1].FollowUpTo).To(Equal(recs[0].SeqNum))
	g.Expect(recs[2].FollowUpTo).To(Equal(recs[0].SeqNum))
	g.Expect(recs[3].FollowUpTo).To(Equal(recs[1].SeqNum))
	g.Expect(recs[3].IsFollowUp).To(BeTrue())
}

// A transaction kept past its event refuses follow-ups: with
// ErrTransactionFinished while the loop runs, ErrClosedController after a
// fatal error.
func TestFollowUpAfterTheEvent(t *testing.T) {
	g := NewWithT(t)
	a := newHandler("a", &journal{})
	var kept api.UpdateOperations
	a.onEvent = func(ev api.Event, txn api.UpdateOperations) error {
		switch ev.GetName() {
		case "keep":
			kept = txn
		case "boom":
			return api.NewFatalError(errors.New("boom"))
		}
		return nil
	}
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	keep := newEvent("keep", api.BestEffort)
	g.Expect(l.PushEvent(keep)).To(Succeed())
	g.Expect(keep.wait(t)).To(Succeed())
	g.Expect(kept.PushFollowUp(newEvent("late", api.BestEffort))).To(MatchError(api.ErrTransactionFinished))

	boom := newEvent("boom", api.BestEffort)
	g.Expect(l.PushEvent(boom)).To(Succeed())
	g.Expect(boom.wait(t)).To(Satisfy(api.IsFatal))
	g.Eventually(l.finished).Should(BeClosed())
	g.Expect(kept.PushFollowUp(newEvent("late", api.BestEffort))).To(MatchError(api.ErrClosedController))
	g.Expect(obs.eventNames()).NotTo(ContainElement("late"))
}

// Follow-ups of an event that ends in a fatal error are never processed:
// they fail with ErrClosedController.
func TestFollowUpsOfAFatalEventFail(t *testing.T) {
	g := NewWithT(t)
	a := newHandler("a", &journal{})
	orphan := newEvent("orphan", api.BestEffort)
	a.onEvent = func(ev api.Event, txn api.UpdateOperations) error {
		if ev.GetName() == "boom" {
			if err := txn.PushFollowUp(orphan); err != nil {
				return err
			}
			return api.NewFatalError(errors.New("boom"))
		}
		return nil
	}
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	g.Expect(l.PushEvent(newEvent("boom", api.BestEffort))).To(Succeed())
	g.Expect(orphan.wait(t)).To(MatchError(api.ErrClosedController))
	g.Expect(obs.eventNames()).To(Equal([]string{api.DBResyncName, "boom"}))
}

// A non-blocking PushEvent from a handler is an ordinary event: it waits
// behind the queue and is not recorded as a follow-up.
func TestPushEventFromAHandlerIsNotAFollowUp(t *testing.T) {
	g := NewWithT(t)
	a := newHandler("a", &journal{})
	release := make(chan struct{})
	var l *eventLoop
	var pushErr error
	a.onEvent = func(ev api.Event, _ api.UpdateOperations) error {
		if ev.GetName() == "first" {
			<-release
			pushErr = l.PushEvent(newEvent("pushed", api.BestEffort))
		}
		return nil
	}
	l, obs := startLoop(t, testConfig(), nil, a)
	g.Expect(l.PushEvent(dbResync())).To(Succeed())
	first, queued := newEvent("first", api.BestEffort), newEvent("queued", api.BestEffort)
	g.Expect(l.PushEvent(first)).To(Succeed())
	g.Expect(l.PushEvent(queued)).To(Succeed())
	close(release)
	g.Eventually(obs.eventNames).Should(HaveLen(4))
	g.Expect(pushErr).NotTo(HaveOccurred())
	g.Expect(obs.eventNames()).To(Equal([]string{api.DBResyncName, "first", "queued", "pushed"}))
	g.Expect(obs.list()[3].IsFollowUp).To(BeFalse())
}
