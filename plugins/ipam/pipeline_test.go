package ipam_test

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Each test here holds the commit of one batch in flight (a faultDB gate
// on pod1's record) and checks what the pipelined keeper does meanwhile:
// it keeps deciding other pods into the next batch, defers a request of
// the pod whose write is pending, and runs a resync only after the commit.

// pipe is an IPAM whose first write of pod1's record waits for the test.
type pipe struct {
	ipam *ipam.Plugin
	fix  *fixture
	fdb  *faultDB
	db   kvdb.Broker
	gate *gate
}

func newPipe(t *testing.T) *pipe {
	t.Helper()
	fdb, db := boltFaults(t)
	p := &pipe{fdb: fdb, db: db, gate: newGate(podKey(pod1))}
	fdb.setDecide(p.gate.decide)
	p.fix = mustFixture(t, fixtureOpts{db: fdb}, nil)
	p.ipam = p.fix.ipam
	// A failed test must not leave Close waiting for the held commit.
	t.Cleanup(func() {
		select {
		case p.gate.open <- pass:
		default:
		}
	})
	return p
}

// hold submits pod1's allocation and waits until its commit is held and
// its decision answered (a keeper that answers only durable outcomes
// fails here).
func (p *pipe) hold(g Gomega) ipam.Submitted {
	dec := submitAsync(func() ipam.Submitted { return ipam.SubmitAllocation(p.ipam, pod1) })
	g.Eventually(p.gate.entered).WithTimeout(10 * time.Second).Should(Receive())
	s := received(g, dec)
	g.Expect(s.Err).NotTo(HaveOccurred())
	return s
}

// submitAsync submits on a goroutine of its own.
func submitAsync(fn func() ipam.Submitted) chan ipam.Submitted {
	c := make(chan ipam.Submitted, 1)
	go func() { c <- fn() }()
	return c
}

// received waits for a submit's decision.
func received(g Gomega, c chan ipam.Submitted) ipam.Submitted {
	var s ipam.Submitted
	g.Eventually(c).WithTimeout(10 * time.Second).Should(Receive(&s))
	return s
}

// final waits for the durable outcome.
func final(s ipam.Submitted) (netip.Addr, error) { return s.Final(context.Background()) }

func storedCursor(g Gomega, db kvdb.Broker) string {
	kv, found, err := db.Get(context.Background(), ipam.CursorKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	return string(kv.Value)
}

func TestADecisionIsAnsweredWhileACommitIsInFlight(t *testing.T) {
	g := NewWithT(t)
	p := newPipe(t)
	first := p.hold(g)

	second := received(g, submitAsync(func() ipam.Submitted { return ipam.SubmitAllocation(p.ipam, pod2) }))
	g.Expect(second.Err).NotTo(HaveOccurred())
	g.Expect(second.Addr).NotTo(Equal(first.Addr), "the next decision sees the one in flight")
	g.Expect(stored(g, p.db, pod2)).To(BeEmpty(), "decided, not durable yet")

	p.gate.open <- pass
	a1, err := final(first)
	g.Expect(err).NotTo(HaveOccurred())
	a2, err := final(second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]netip.Addr{a1, a2}).To(Equal([]netip.Addr{first.Addr, second.Addr}), "final confirms the decision")
	g.Expect(stored(g, p.db, pod1)).To(Equal(a1.String()))
	g.Expect(stored(g, p.db, pod2)).To(Equal(a2.String()))
}

// The writes decided while bolt commits share its next commit: the one
// batching layer is bolt's committer, fed in decision order.
func TestWritesDecidedDuringACommitShareTheNextOne(t *testing.T) {
	g := NewWithT(t)
	stall := newCommitStall()
	var mu sync.Mutex
	var sizes []int
	hook := stall.hook
	db := openBoltWithHook(t, filepath.Join(t.TempDir(), "bolt.db"), func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		hook(n)
	})
	i := mustFixture(t, fixtureOpts{db: db}, nil).ipam
	mu.Lock()
	before := len(sizes)
	mu.Unlock()

	entered := stall.arm()
	first := received(g, submitAsync(func() ipam.Submitted { return ipam.SubmitAllocation(i, pod1) }))
	awaitEntered(g, entered)
	g.Expect(first.Err).NotTo(HaveOccurred())
	second := ipam.SubmitAllocation(i, pod2)
	third := ipam.SubmitAllocation(i, pod3)
	g.Expect(second.Err).NotTo(HaveOccurred(), "decided while the commit is held")
	g.Expect(third.Err).NotTo(HaveOccurred())
	stall.release()
	for _, s := range []ipam.Submitted{first, second, third} {
		_, err := final(s)
		g.Expect(err).NotTo(HaveOccurred())
	}
	mu.Lock()
	g.Expect(sizes[before:]).To(Equal([]int{1, 2}), "pod1's commit, then pod2's and pod3's together")
	mu.Unlock()
	g.Expect(storedCursor(g, db)).To(Equal(third.Addr.String()), "the cursor rides with every allocation")
}

func TestAReleaseOfAPodWhoseStoreIsInFlightWaitsThenReleases(t *testing.T) {
	g := NewWithT(t)
	p := newPipe(t)
	alloc := p.hold(g)
	release := submitAsync(func() ipam.Submitted { return ipam.SubmitRelease(p.ipam, pod1) })
	g.Eventually(func() int { return ipam.QueuedRequests(p.ipam) }).WithTimeout(10 * time.Second).Should(Equal(1))
	g.Expect(release).NotTo(Receive(), "deferred: not decided while the pod's store is in flight")

	p.gate.open <- pass
	_, err := final(alloc)
	g.Expect(err).NotTo(HaveOccurred())
	rel := received(g, release)
	g.Expect(rel.Err).NotTo(HaveOccurred())
	g.Expect(rel.Addr).To(Equal(alloc.Addr), "the release saw the stored allocation")
	_, err = final(rel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored(g, p.db, pod1)).To(BeEmpty(), "the delete came after the store")
	g.Expect(p.ipam.GetPodIP(pod1)).To(BeNil())
}

func TestAFailedCommitInFlightLeavesTheNextBatchAlone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     fault
		failReads bool // the read-back fails too: the outcome stays unknown
		wantErr   string
		wantHeld  bool
	}{
		{name: "undone", fault: failBefore, wantErr: errInjected.Error()},
		{name: "unsure", fault: lostUnknown, failReads: true, wantErr: "unknown", wantHeld: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newPipe(t)
			first := p.hold(g)
			others := []ipam.Submitted{ipam.SubmitAllocation(p.ipam, pod2), ipam.SubmitAllocation(p.ipam, pod3)}
			p.fdb.setFailReads(tc.failReads)
			p.gate.open <- tc.fault

			_, err := final(first)
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			p.fdb.setFailReads(false)
			for n, s := range others {
				a, err := final(s)
				g.Expect(err).NotTo(HaveOccurred(), "pod %d of the next batch", n+2)
				g.Expect(a).To(Equal(s.Addr))
			}
			g.Expect(stored(g, p.db, pod2)).To(Equal(others[0].Addr.String()))
			g.Expect(stored(g, p.db, pod3)).To(Equal(others[1].Addr.String()))
			g.Expect(stored(g, p.db, pod1)).To(BeEmpty())
			g.Expect(p.ipam.GetPodIP(pod1) != nil).To(Equal(tc.wantHeld))
		})
	}
}

func TestAResyncArrivingDuringACommitRunsAfterItAndSeesTheRecord(t *testing.T) {
	g := NewWithT(t)
	p := newPipe(t)
	alloc := p.hold(g)
	resync := async(func() (net.IP, error) {
		return nil, p.ipam.Resync(&api.HealingResync{Type: api.AfterError}, api.KubeStateData{}, 2, nil)
	})
	g.Eventually(func() int { return ipam.QueuedRequests(p.ipam) }).WithTimeout(10 * time.Second).Should(Equal(1))
	later := submitAsync(func() ipam.Submitted { return ipam.SubmitAllocation(p.ipam, pod2) })
	g.Eventually(func() int { return ipam.QueuedRequests(p.ipam) }).WithTimeout(10*time.Second).Should(Equal(2),
		"a request behind the resync stays queued")
	g.Expect(resync.returned()).To(BeFalse(), "the resync waits for the commit in flight")
	g.Expect(later).NotTo(Receive())

	p.gate.open <- pass
	_, err := final(alloc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resync.wait(g).err).NotTo(HaveOccurred())
	g.Expect(ipOf(p.ipam.GetPodIP(pod1)).String()).To(Equal(alloc.Addr.String()), "the resync rebuilt from a store holding the record")
	next := received(g, later)
	g.Expect(next.Err).NotTo(HaveOccurred())
	g.Expect(next.Addr).NotTo(Equal(alloc.Addr))
}

// Close waits for the outcomes of the writes the store took (pod1's,
// held, and pod2's, queued behind it), and fails what was not decided: a
// deferred release and every later call. Once the release of pod1 is
// answered, nothing of it may happen any more.
func TestCloseDuringACommitFinishesItAndFailsTheRest(t *testing.T) {
	g := NewWithT(t)
	p := newPipe(t)
	inFlight := p.hold(g)
	queued := ipam.SubmitAllocation(p.ipam, pod2) // its write waits behind pod1's
	deferred := submitAsync(func() ipam.Submitted { return ipam.SubmitRelease(p.ipam, pod1) })
	g.Eventually(func() int { return ipam.QueuedRequests(p.ipam) }).WithTimeout(10 * time.Second).Should(Equal(1))
	closed := async(func() (net.IP, error) { return nil, p.ipam.Close() })
	g.Eventually(func() bool { return ipam.Closing(p.ipam) }).WithTimeout(10 * time.Second).Should(BeTrue())
	g.Expect(closed.returned()).To(BeFalse(), "Close waits for the commit in flight")

	p.gate.open <- pass
	g.Expect(closed.wait(g).err).NotTo(HaveOccurred())
	a, err := final(inFlight)
	g.Expect(err).NotTo(HaveOccurred(), "the commit in flight finished")
	g.Expect(stored(g, p.db, pod1)).To(Equal(a.String()))
	b, err := final(queued)
	g.Expect(err).NotTo(HaveOccurred(), "the store took it: its outcome is the store's")
	g.Expect(stored(g, p.db, pod2)).To(Equal(b.String()))
	rel := received(g, deferred)
	g.Expect(rel.Err).To(MatchError(ContainSubstring("IPAM is closed")))
	_, err = final(rel)
	g.Expect(err).To(MatchError(ContainSubstring("IPAM is closed")))
	after := ipam.SubmitAllocation(p.ipam, pod3)
	g.Expect(after.Err).To(MatchError(ContainSubstring("IPAM is closed")))
}

func TestFinalWithAnEndedContextReturnsItsErrorAndTheOutcomeStillHappens(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{name: "canceled", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, want: context.Canceled},
		{name: "deadline", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Unix(0, 0))
		}, want: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newPipe(t)
			s := p.hold(g)
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := s.Final(ctx)
			g.Expect(err).To(MatchError(tc.want))

			p.gate.open <- pass
			a, err := final(s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stored(g, p.db, pod1)).To(Equal(a.String()), "the outcome happened all the same")
			a, err = s.Final(ctx)
			g.Expect(err).NotTo(HaveOccurred(), "an outcome known already wins over an ended ctx")
			g.Expect(a).To(Equal(s.Addr))
		})
	}
}

func TestARequestThatNeedsNoWriteHasItsOutcomeAtOnce(t *testing.T) {
	g := NewWithT(t)
	p := newPipe(t)
	ip, err := p.ipam.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	p.hold(g)

	again := ipam.SubmitAllocation(p.ipam, pod2) // held and durable: no write
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a, err := again.Final(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "final == decision, known at once")
	g.Expect(a.String()).To(Equal(ip.String()))
	gone := ipam.SubmitRelease(p.ipam, pod4) // holds nothing: no write
	_, err = gone.Final(ctx)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestASweepDueDuringACommitRunsAfterIt(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	gone := podmodel.ID{Name: "gone", Namespace: "default"}
	g.Expect(db.Put(context.Background(), podKey(gone), []byte("1.2.128.11"))).To(Succeed())
	gt := newGate(podKey(pod1))
	heldAtSweep := make(chan bool, 1)
	var held sync.Mutex // held while pod1's commit waits in the gate
	fdb.setDecide(func(ops []kvdb.Op) fault {
		if touches(ops, podKey(gone)) {
			locked := !held.TryLock()
			if !locked {
				held.Unlock()
			}
			heldAtSweep <- locked
			return pass
		}
		if touches(ops, podKey(pod1)) {
			held.Lock()
			defer held.Unlock()
		}
		return gt.decide(ops)
	})
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{db: fdb, clock: clk, grace: time.Minute}, kubePods(bystander))
	f.beat(t)
	t.Cleanup(func() {
		select {
		case gt.open <- pass:
		default:
		}
	})
	alloc := submitAsync(func() ipam.Submitted { return ipam.SubmitAllocation(f.ipam, pod1) })
	g.Eventually(gt.entered).WithTimeout(10 * time.Second).Should(Receive())
	g.Expect(received(g, alloc).Err).NotTo(HaveOccurred())

	clk.Advance(time.Minute) // the grace period of "gone" ends
	g.Eventually(func() int { return ipam.QueuedRequests(f.ipam) }).WithTimeout(10*time.Second).Should(Equal(1),
		"the sweep is due and waits for the commit")
	gt.open <- pass
	var sweptWhileHeld bool
	g.Eventually(heldAtSweep).WithTimeout(10 * time.Second).Should(Receive(&sweptWhileHeld))
	g.Expect(sweptWhileHeld).To(BeFalse(), "two commits at once")
	g.Eventually(func() string { return stored(g, db, gone) }).WithTimeout(10 * time.Second).Should(BeEmpty())
	g.Expect(f.ipam.GetPodIP(gone)).To(BeNil())
}

// The pod-keyed record an attachment adopted is stale; a failed delete
// of it rides along with the next allocation's transaction.
func TestTheDeleteOfAStaleRecordRidesWithTheNextBatch(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	stale := podmodel.ID{Name: "stale", Namespace: "default"}
	g.Expect(db.Put(context.Background(), podKey(stale), []byte("1.2.128.12"))).To(Succeed())
	g.Expect(db.Put(context.Background(), ipam.AttachmentPrefix+"net/c1/eth0",
		[]byte(`{"ip":"1.2.128.12","pod":{"name":"stale","namespace":"default"},"network":"net","containerId":"c1","ifName":"eth0"}`))).To(Succeed())
	var mu sync.Mutex
	var failed bool
	var carried [][]kvdb.Op
	fdb.setDecide(func(ops []kvdb.Op) fault {
		mu.Lock()
		defer mu.Unlock()
		if !touches(ops, podKey(stale)) {
			return pass
		}
		if !failed {
			failed = true
			return failBefore // the resync's delete fails
		}
		carried = append(carried, ops)
		return pass
	})
	f := mustFixture(t, fixtureOpts{db: fdb}, nil)
	g.Expect(stored(g, db, stale)).To(Equal("1.2.128.12"), "the resync could not delete it")

	s := ipam.SubmitAllocation(f.ipam, pod1)
	_, err := final(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored(g, db, stale)).To(BeEmpty(), "deleted with the allocation's batch")
	mu.Lock()
	defer mu.Unlock()
	g.Expect(carried).To(HaveLen(1))
	g.Expect(touches(carried[0], podKey(pod1))).To(BeTrue())
}

func TestDeferredRequestsOfAPodKeepTheirOrder(t *testing.T) {
	g := NewWithT(t)
	p := newPipe(t)
	first := p.hold(g)
	release := submitAsync(func() ipam.Submitted { return ipam.SubmitRelease(p.ipam, pod1) })
	g.Eventually(func() int { return ipam.QueuedRequests(p.ipam) }).WithTimeout(10 * time.Second).Should(Equal(1))
	again := submitAsync(func() ipam.Submitted { return ipam.SubmitAllocation(p.ipam, pod1) })
	g.Eventually(func() int { return ipam.QueuedRequests(p.ipam) }).WithTimeout(10 * time.Second).Should(Equal(2))
	other := ipam.SubmitAllocation(p.ipam, pod2)
	g.Expect(other.Err).NotTo(HaveOccurred(), "another pod is decided meanwhile")

	p.gate.open <- pass
	_, err := final(first)
	g.Expect(err).NotTo(HaveOccurred())
	rel := received(g, release)
	_, err = final(rel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Addr).To(Equal(first.Addr))
	alloc := received(g, again)
	a, err := final(alloc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ipOf(p.ipam.GetPodIP(pod1)).String()).To(Equal(a.String()), "the release came first, the allocation last")
	g.Expect(stored(g, p.db, pod1)).To(Equal(a.String()))
}
