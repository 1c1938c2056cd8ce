package kvdbtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// eventTimeout bounds the wait for one watch event.
const eventTimeout = 10 * time.Second

// quietPeriod is how long a watch must stay silent to count as "no more
// events".
const quietPeriod = 150 * time.Millisecond

// next receives one event; it fails if the channel closes or stays empty
// for eventTimeout.
func next(g Gomega, ch <-chan kvdb.WatchEvent) kvdb.WatchEvent {
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	select {
	case ev, ok := <-ch:
		g.Expect(ok).To(BeTrue(), "the watch channel closed early")
		return ev
	case <-timer.C:
		g.Expect(false).To(BeTrue(), "no watch event within %s", eventTimeout)
		return kvdb.WatchEvent{}
	}
}

// expectEvent receives one event and checks everything but the revision.
func expectEvent(g Gomega, ch <-chan kvdb.WatchEvent, typ kvdb.EventType, key string, value, prev []byte) kvdb.WatchEvent {
	ev := next(g, ch)
	g.Expect(ev.Type).To(Equal(typ), "event %+v", ev)
	g.Expect(ev.Key).To(Equal(key))
	g.Expect(ev.Value).To(Equal(value))
	g.Expect(ev.PrevValue).To(Equal(prev))
	return ev
}

func testPrefixedWatch(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	vb := kvdb.WithPrefix(b, "view/")
	ch, err := vb.Watch(ctx, "", 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Put(ctx, "viewer", []byte("neighbour"))).To(Succeed())
	g.Expect(a.Put(ctx, "view/w", []byte("x"))).To(Succeed())
	g.Expect(a.Put(ctx, "outside", []byte("y"))).To(Succeed())
	_, err = vb.Delete(ctx, "w")
	g.Expect(err).NotTo(HaveOccurred())
	expectEvent(g, ch, kvdb.EventPut, "w", []byte("x"), nil)
	expectEvent(g, ch, kvdb.EventDelete, "w", nil, []byte("x"))
	g.Consistently(ch).WithTimeout(quietPeriod).ShouldNot(Receive())
}

func testWatchFromListRev(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "w/1", []byte("a"))).To(Succeed())
	g.Expect(a.Put(ctx, "w/2", []byte("b"))).To(Succeed())
	kvs, rev, err := b.List(ctx, "w/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(HaveLen(2))

	g.Expect(a.Put(ctx, "w/1", []byte("a2"))).To(Succeed())
	_, err = a.Delete(ctx, "w/2")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Put(ctx, "x/ignored", []byte("z"))).To(Succeed())
	g.Expect(b.Put(ctx, "w/3", []byte("c"))).To(Succeed())

	ch, err := b.Watch(ctx, "w/", rev+1)
	g.Expect(err).NotTo(HaveOccurred())
	e1 := expectEvent(g, ch, kvdb.EventPut, "w/1", []byte("a2"), []byte("a"))
	e2 := expectEvent(g, ch, kvdb.EventDelete, "w/2", nil, []byte("b"))
	e3 := expectEvent(g, ch, kvdb.EventPut, "w/3", []byte("c"), nil)
	g.Expect(e1.Revision).To(Equal(rev+1), "no gap after the snapshot")
	g.Expect(e2.Revision).To(BeNumerically(">", e1.Revision))
	g.Expect(e3.Revision).To(BeNumerically(">", e2.Revision))

	g.Expect(a.Put(ctx, "w/4", []byte("d"))).To(Succeed())
	e4 := expectEvent(g, ch, kvdb.EventPut, "w/4", []byte("d"), nil)
	g.Expect(e4.Revision).To(BeNumerically(">", e3.Revision))
	g.Consistently(ch).WithTimeout(quietPeriod).ShouldNot(Receive(), "no duplicates")
}

func testWatchFromNow(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "n/old", []byte("0"))).To(Succeed())
	ch, err := b.Watch(ctx, "n/", 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Put(ctx, "n/1", []byte("1"))).To(Succeed())
	g.Expect(a.Put(ctx, "n/1", []byte("2"))).To(Succeed())
	expectEvent(g, ch, kvdb.EventPut, "n/1", []byte("1"), nil)
	expectEvent(g, ch, kvdb.EventPut, "n/1", []byte("2"), []byte("1"))
	g.Consistently(ch).WithTimeout(quietPeriod).ShouldNot(Receive(), "nothing from before the watch")
}

func testWatchCancel(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	wctx, cancel := context.WithCancel(t.Context())
	ch, err := a.Watch(wctx, "c/", 0)
	g.Expect(err).NotTo(HaveOccurred())
	cancel()
	g.Eventually(ch).WithTimeout(eventTimeout).Should(BeClosed())
	g.Expect(b.Put(t.Context(), "c/after", nil)).To(Succeed(), "the store still works")
}

func testWatchRace(t *testing.T, a, b kvdb.Broker) {
	const goroutines, puts = 8, 10
	g := NewWithT(t)
	ctx := t.Context()
	_, rev, err := a.List(ctx, "race/")
	g.Expect(err).NotTo(HaveOccurred())
	ch, err := a.Watch(ctx, "race/", rev+1)
	g.Expect(err).NotTo(HaveOccurred())

	errs := runWriters([]kvdb.Broker{a, b}, goroutines, func(br kvdb.Broker, name string) error {
		for i := range puts {
			if err := br.Put(ctx, fmt.Sprintf("race/%s/%d", name, i), []byte(name)); err != nil {
				return err
			}
		}
		return nil
	})

	seen := map[string]bool{}
	last := rev
	for range 2 * goroutines * puts {
		ev := next(g, ch)
		g.Expect(ev.Type).To(Equal(kvdb.EventPut))
		g.Expect(seen[ev.Key]).To(BeFalse(), "key %s delivered twice", ev.Key)
		seen[ev.Key] = true
		g.Expect(ev.Revision).To(BeNumerically(">", last), "revision order")
		last = ev.Revision
	}
	g.Expect(<-errs).To(BeEmpty())
	g.Consistently(ch).WithTimeout(quietPeriod).ShouldNot(Receive())
}

// runWriters runs n goroutines per broker, each calling fn with a unique
// name, and sends the errors they return once all are done.
func runWriters(brokers []kvdb.Broker, n int, fn func(b kvdb.Broker, name string) error) <-chan []error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for ci, br := range brokers {
		for gi := range n {
			wg.Go(func() {
				if err := fn(br, fmt.Sprintf("c%d-g%d", ci, gi)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
	}
	out := make(chan []error, 1)
	go func() {
		wg.Wait()
		out <- errs
	}()
	return out
}
