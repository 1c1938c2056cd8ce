package kvdbtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// Outcomes is a store set up for RunOutcomeContract: two clients and the
// faults the store can suffer.
type Outcomes struct {
	// A is the client under test, B another client of the same store.
	// The store holds no keys when open returns.
	A, B kvdb.Broker
	// StallQueue keeps the store's writer busy so that A's next writes
	// wait in its queue, and returns the function that lets it go on.
	// Nil for a store without a write queue (etcd).
	StallQueue func() (release func())
	// StallTaken holds A's next write after the store has taken it, before
	// its outcome is known (bolt: inside the commit that holds it; etcd:
	// the request on its way to the server), and returns the release.
	StallTaken func() (release func())
	// OrderedReads: a read started after a write returned with an
	// unknown outcome waits for that write's commit (bolt). A store
	// without it (etcd) is checked for the fencing of a late conditional
	// write instead.
	OrderedReads bool
}

// stallWait is how long a stalled write's ctx lives.
const stallWait = 300 * time.Millisecond

// RunOutcomeContract checks the rules of kvdb's "Write outcomes" against
// the stores made by open: one outcome per write, a write whose ctx ends
// before the store took it never applied, an unknown outcome only for a
// write the store took, resolved as the store documents.
func RunOutcomeContract(t *testing.T, open func(t *testing.T) Outcomes) {
	cases := []struct {
		name string
		run  func(t *testing.T, o Outcomes)
	}{
		{"EndedCtxIsNotApplied", testEndedCtx},
		{"WithdrawnWhileQueued", testWithdrawnWhileQueued},
		{"SubmitWithdrawnWhileQueued", testSubmitWithdrawn},
		{"SubmitInOrder", testSubmitInOrder},
		{"UnknownOnlyOnceTaken", testUnknownOnceTaken},
		{"LateConditionalWriteIsFenced", testLateWriteFenced},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

// notApplied asserts that err reports a write that was not applied.
func notApplied(g Gomega, err error, because error) {
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, kvdb.ErrUnknownOutcome)).To(BeFalse(), "not applied, not unknown: %v", err)
	g.Expect(err).To(MatchError(because))
}

func testEndedCtx(t *testing.T, o Outcomes) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(o.A.Put(ctx, "kept", []byte("v"))).To(Succeed())
	ended, cancel := context.WithCancel(ctx)
	cancel()
	notApplied(g, o.A.Put(ended, "k", []byte("v")), context.Canceled)
	_, err := o.A.Delete(ended, "kept")
	notApplied(g, err, context.Canceled)
	_, err = o.A.Txn(ended, []kvdb.Cmp{kvdb.IfAbsent("k")}, []kvdb.Op{kvdb.PutOp("k", []byte("v"))})
	notApplied(g, err, context.Canceled)
	if s, ok := o.A.(kvdb.Submitter); ok {
		called := false
		err := s.Submit(ended, nil, []kvdb.Op{kvdb.PutOp("k", []byte("v"))}, func(bool, error) { called = true })
		notApplied(g, err, context.Canceled)
		g.Expect(called).To(BeFalse(), "a Submit that fails calls nothing")
	}
	// A write after them is ordered after them: none of them lands.
	g.Expect(o.A.Put(ctx, "after", nil)).To(Succeed())
	expectMissing(ctx, g, o.B, "k")
	g.Expect(string(mustGet(ctx, g, o.B, "kept").Value)).To(Equal("v"))
}

func testWithdrawnWhileQueued(t *testing.T, o Outcomes) {
	if o.StallQueue == nil {
		t.Log("the store has no write queue: nothing to withdraw")
		return
	}
	g := NewWithT(t)
	ctx := t.Context()
	release := o.StallQueue()
	wctx, cancel := context.WithTimeout(ctx, stallWait)
	defer cancel()
	notApplied(g, o.A.Put(wctx, "w", []byte("late")), context.DeadlineExceeded)
	release()
	g.Expect(o.A.Put(ctx, "after", nil)).To(Succeed(), "a write queued after the withdrawn one")
	expectMissing(ctx, g, o.B, "w")
}

func testSubmitWithdrawn(t *testing.T, o Outcomes) {
	s, ok := o.A.(kvdb.Submitter)
	if o.StallQueue == nil || !ok {
		t.Log("the store has no write queue or no Submit")
		return
	}
	g := NewWithT(t)
	ctx := t.Context()
	release := o.StallQueue()
	wctx, cancel := context.WithCancel(ctx)
	out := make(chan error, 2)
	g.Expect(s.Submit(wctx, nil, []kvdb.Op{kvdb.PutOp("w", []byte("late"))}, func(_ bool, err error) { out <- err })).To(Succeed())
	g.Consistently(out).WithTimeout(100*time.Millisecond).ShouldNot(Receive(), "queued: no outcome yet")
	cancel()
	var err error
	g.Eventually(out).Should(Receive(&err), "withdrawn at once, while the store is still stalled")
	notApplied(g, err, context.Canceled)
	release()
	g.Expect(o.A.Put(ctx, "after", nil)).To(Succeed())
	expectMissing(ctx, g, o.B, "w")
	g.Consistently(out).WithTimeout(100*time.Millisecond).ShouldNot(Receive(), "done is called once")
}

func testSubmitInOrder(t *testing.T, o Outcomes) {
	s, ok := o.A.(kvdb.Submitter)
	if !ok {
		t.Log("the store has no Submit")
		return
	}
	g := NewWithT(t)
	ctx := t.Context()
	const n = 50
	var mu sync.Mutex
	var order []int
	var errs []error
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		op := kvdb.PutOp("seq", []byte{byte(i)})
		cmps := []kvdb.Cmp(nil)
		if i > 0 {
			cmps = []kvdb.Cmp{kvdb.IfValue("seq", []byte{byte(i - 1)})} // holds only in submission order
		}
		g.Expect(s.Submit(ctx, cmps, []kvdb.Op{op}, func(ok bool, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if ok {
				order = append(order, i)
			}
			errs = append(errs, err)
		})).To(Succeed())
	}
	wg.Wait()
	g.Expect(errs).To(HaveEach(BeNil()))
	g.Expect(order).To(HaveLen(n), "every compare held: applied in submission order")
	g.Expect(mustGet(ctx, g, o.B, "seq").Value).To(Equal([]byte{n - 1}))
}

func testUnknownOnceTaken(t *testing.T, o Outcomes) {
	g := NewWithT(t)
	ctx := t.Context()
	release := o.StallTaken()
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, stallWait)
	defer cancel()
	err := o.A.Put(wctx, "u", []byte("v"))
	g.Expect(err).To(MatchError(kvdb.ErrUnknownOutcome), "the store took the write: its outcome is unknown")
	if !o.OrderedReads {
		release()
		released = true
		return
	}
	got := make(chan kvdb.KeyValue, 1)
	go func() {
		kv, _, err := o.B.Get(ctx, "u")
		if err != nil {
			kv.Key = "error: " + err.Error()
		}
		got <- kv
	}()
	g.Consistently(got).WithTimeout(100*time.Millisecond).ShouldNot(Receive(), "a read after it waits for its commit")
	release()
	released = true
	var kv kvdb.KeyValue
	g.Eventually(got).Should(Receive(&kv))
	g.Expect(kv.Key).To(Equal("u"), "the read sees the write's outcome: applied")
	g.Expect(string(kv.Value)).To(Equal("v"))
}

func testLateWriteFenced(t *testing.T, o Outcomes) {
	g := NewWithT(t)
	ctx := t.Context()
	release := o.StallTaken()
	wctx, cancel := context.WithTimeout(ctx, stallWait)
	defer cancel()
	ok, err := o.A.Txn(wctx, []kvdb.Cmp{kvdb.IfAbsent("f")}, []kvdb.Op{kvdb.PutOp("f", []byte("late"))})
	if err == nil {
		release()
		g.Expect(ok).To(BeTrue())
		t.Fatal("a stalled write returned applied")
	}
	g.Expect(err).To(MatchError(kvdb.ErrUnknownOutcome))
	if o.OrderedReads {
		// The store decides in order: the late write is applied before
		// the fence, which then finds the key taken.
		done := make(chan error, 1)
		go func() {
			_, err := o.B.Txn(ctx, []kvdb.Cmp{kvdb.IfAbsent("f")}, []kvdb.Op{kvdb.PutOp("f", []byte("fence"))})
			done <- err
		}()
		release()
		g.Eventually(done).Should(Receive(BeNil()))
		g.Expect(string(mustGet(ctx, g, o.B, "f").Value)).To(Equal("late"))
		return
	}
	// The fence lands first (another connection); the late write's
	// condition no longer holds whenever it arrives.
	g.Expect(o.B.Put(ctx, "f", []byte("fence"))).To(Succeed())
	release()
	g.Consistently(func() string { return string(mustGet(ctx, g, o.B, "f").Value) }).WithTimeout(time.Second).
		Should(Equal("fence"))
}
