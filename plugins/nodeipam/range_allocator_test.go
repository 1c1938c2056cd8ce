package nodeipam

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// rig is a range allocator on a fake clientset with a running informer.
type rig struct {
	client  *fake.Clientset
	alloc   *RangeAllocator
	events  *record.FakeRecorder
	ledger  *MemLedger
	cancel  func()
	stopped chan struct{}
}

func testConfig(clusters ...string) Config {
	c := DefaultConfig()
	c.Enabled = true
	c.ClusterCIDRs = clusters
	c.InitialRetry = 10 * time.Millisecond
	c.MaxBackoff = 50 * time.Millisecond
	return c
}

func node(name string, cidrs ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
		n.Spec.PodCIDRs = cidrs
	}
	return n
}

func newRig(t *testing.T, cfg Config, ledger *MemLedger, nodes ...*v1.Node) *rig {
	t.Helper()
	client := fake.NewClientset()
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ledger == nil {
		ledger = NewMemLedger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory, nodeInf := startInformer(ctx, client)
	events := record.NewFakeRecorder(1000)
	a, err := New(ctx, Params{Client: client, Nodes: nodeInf, Config: cfg, Ledger: ledger, Recorder: events})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &rig{client: client, alloc: a.(*RangeAllocator), events: events, ledger: ledger, cancel: cancel, stopped: make(chan struct{})}
	go func() { defer close(r.stopped); r.alloc.Run(ctx.Done()) }()
	t.Cleanup(func() { cancel(); <-r.stopped; factory.Shutdown() })
	return r
}

func (r *rig) cidrsOf(g Gomega, name string) []string {
	n, err := r.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return n.Spec.PodCIDRs
}

func (r *rig) create(t *testing.T, n *v1.Node) {
	t.Helper()
	if _, err := r.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) delete(t *testing.T, name string) {
	t.Helper()
	if err := r.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRangeAllocatorGivesNodesWithoutCIDRsTheNextBlocks(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/22"), nil, node("a", "10.0.1.0/24"))
	r.create(t, node("b"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "b")).To(Equal([]string{"10.0.0.0/24"})) }).Should(Succeed())
	r.create(t, node("c"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "c")).To(Equal([]string{"10.0.2.0/24"})) }).Should(Succeed())
	r.delete(t, "b")
	g.Eventually(func() []string { return r.alloc.Status().Pending }).Should(BeEmpty())
	g.Eventually(func() uint64 { return r.alloc.Status().Ranges[0].Used }).Should(Equal(uint64(2)))
	for i := range 2 {
		r.create(t, node(fmt.Sprintf("d%d", i)))
	}
	g.Eventually(func(g Gomega) {
		got := append(r.cidrsOf(g, "d0"), r.cidrsOf(g, "d1")...)
		g.Expect(got).To(ConsistOf("10.0.3.0/24", "10.0.0.0/24"))
	}).Should(Succeed())
	g.Eventually(func() []Claim { c, _ := r.ledger.List(context.Background()); return c }).Should(BeEmpty())
}

// events drains the fake recorder.
func (r *rig) eventsSoFar() []string {
	var out []string
	for {
		select {
		case e := <-r.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (r *rig) condition(g Gomega, name string) *v1.NodeCondition {
	n, err := r.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ConditionPodCIDRAllocated {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// A node that finds the range full gets an Event and a False condition,
// and the CIDR of the next node deleted; the condition turns True.
func TestRangeAllocatorRetriesANodeThatFoundTheRangeFull(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/23"), nil, node("a", "10.0.0.0/24"), node("b", "10.0.1.0/24"))
	r.create(t, node("c"))
	var seen []string
	g.Eventually(func(g Gomega) {
		seen = append(seen, r.eventsSoFar()...)
		g.Expect(seen).To(ContainElement(ContainSubstring("Warning CIDRNotAvailable node c: allocate a /24 in 10.0.0.0/23")))
		cond := r.condition(g, "c")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(v1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(ReasonCIDRNotAvailable))
	}).Should(Succeed())
	g.Expect(r.alloc.Status().Waiting).To(Equal([]string{"c"}))
	r.delete(t, "a")
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "c")).To(Equal([]string{"10.0.0.0/24"})) }).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cond := r.condition(g, "c")
		g.Expect(cond.Status).To(Equal(v1.ConditionTrue))
	}).Should(Succeed())
	g.Expect(r.alloc.Status().Waiting).To(BeEmpty())
	g.Expect(testutil.ToFloat64(r.alloc.metrics.failures.WithLabelValues(ReasonCIDRNotAvailable))).To(BeNumerically(">=", 1))
	g.Expect(testutil.ToFloat64(r.alloc.metrics.free.WithLabelValues("10.0.0.0/23"))).To(BeZero())
	g.Expect(testutil.ToFloat64(r.alloc.metrics.used.WithLabelValues("10.0.0.0/23"))).To(Equal(2.0))
}

// CIDRs outside the ranges and CIDRs two nodes hold are reported and left
// as they are; the first holder keeps the block.
func TestRangeAllocatorReportsOutOfRangeAndConflicts(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/22"), nil,
		node("out", "192.168.0.0/24"), node("y", "10.0.0.0/24"), node("z", "10.0.0.0/24"))
	events := r.eventsSoFar()
	g.Expect(events).To(ContainElement(ContainSubstring("Warning CIDROutOfRange node out holds 192.168.0.0/24")))
	g.Expect(events).To(ContainElement(ContainSubstring("Warning CIDRConflict node z holds 10.0.0.0/24, which node y holds too")))
	g.Expect(r.alloc.Status().Ranges[0].Used).To(Equal(uint64(1)))
	r.delete(t, "z")
	r.create(t, node("n1"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "n1")).To(Equal([]string{"10.0.1.0/24"})) }).Should(Succeed())
	g.Expect(r.alloc.Status().Ranges[0].Used).To(Equal(uint64(2)), "y still holds 10.0.0.0/24")
	g.Consistently(func(g Gomega) { g.Expect(r.cidrsOf(g, "out")).To(Equal([]string{"192.168.0.0/24"})) }, "100ms").Should(Succeed())
}

// Dual-stack: a node gets one CIDR of each range, in the order of the
// config, with the service ranges skipped.
func TestRangeAllocatorDualStack(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig("10.0.0.0/22", "fd00::/62")
	cfg.ServiceCIDR, cfg.SecondaryServiceCIDR = "10.0.0.0/28", "fd00::/120"
	r := newRig(t, cfg, nil)
	r.create(t, node("a"))
	g.Eventually(func(g Gomega) {
		g.Expect(r.cidrsOf(g, "a")).To(Equal([]string{"10.0.1.0/24", "fd00:0:0:1::/64"}))
	}).Should(Succeed())
	n, _ := r.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
	g.Expect(n.Spec.PodCIDR).To(Equal("10.0.1.0/24"))
}

// A claim still pending at start is honoured: its node gets the claimed
// CIDR, nobody else does; a claim of a node that is gone is deleted.
func TestRangeAllocatorRestoresPendingClaims(t *testing.T) {
	g := NewWithT(t)
	ledger := NewMemLedger()
	ctx := context.Background()
	g.Expect(ledger.Put(ctx, Claim{Node: "p", UID: "uid-p", CIDRs: []string{"10.0.2.0/24"}})).To(Succeed())
	g.Expect(ledger.Put(ctx, Claim{Node: "gone", UID: "uid-gone", CIDRs: []string{"10.0.1.0/24"}})).To(Succeed())
	g.Expect(ledger.Put(ctx, Claim{Node: "q", UID: "uid-other", CIDRs: []string{"10.0.2.0/24"}})).To(Succeed())
	r := newRig(t, testConfig("10.0.0.0/22"), ledger, node("p"), node("q"))
	g.Eventually(func(g Gomega) {
		g.Expect(r.cidrsOf(g, "p")).To(Equal([]string{"10.0.2.0/24"}))
		g.Expect(r.cidrsOf(g, "q")).To(Equal([]string{"10.0.0.0/24"}), "q's claim was for another node of that name")
	}).Should(Succeed())
	g.Eventually(func() []Claim { c, _ := ledger.List(ctx); return c }).Should(BeEmpty())
}

// A patch that keeps failing leaves the CIDR reserved and claimed; the
// retry patches the same CIDR.
func TestRangeAllocatorKeepsTheCIDROfAFailedPatch(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/22"), nil)
	var fails atomic.Int32
	fails.Store(2 * patchRetries)
	r.client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "" && fails.Add(-1) >= 0 {
			return true, nil, apierrors.NewServiceUnavailable("injected")
		}
		return false, nil, nil
	})
	r.create(t, node("a"))
	g.Eventually(func(g Gomega) {
		c, _ := r.ledger.List(context.Background())
		g.Expect(c).To(ConsistOf(Claim{Node: "a", UID: "uid-a", CIDRs: []string{"10.0.0.0/24"}}))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "a")).To(Equal([]string{"10.0.0.0/24"})) }).Should(Succeed())
	g.Eventually(func() []Claim { c, _ := r.ledger.List(context.Background()); return c }).Should(BeEmpty())
	g.Expect(r.eventsSoFar()).To(ContainElement(ContainSubstring("Warning CIDRAssignmentFailed")))
	g.Expect(r.alloc.Status().Ranges[0].Used).To(Equal(uint64(1)))
}

// A node deleted while its patch is in flight has its CIDR freed.
func TestRangeAllocatorFreesTheCIDROfANodeGoneDuringThePatch(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/22"), nil)
	r.client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.PatchAction).GetName() == "a" {
			return true, nil, apierrors.NewNotFound(v1.Resource("nodes"), "a")
		}
		return false, nil, nil
	})
	r.create(t, node("a"))
	g.Eventually(func() uint64 { return testutilReleases(r) }).Should(Equal(uint64(1)))
	g.Expect(r.alloc.Status().Ranges[0].Used).To(BeZero())
	g.Expect(r.alloc.Status().Pending).To(BeEmpty())
}

func testutilReleases(r *rig) uint64 {
	return uint64(testutil.ToFloat64(r.alloc.metrics.releases.WithLabelValues("10.0.0.0/22")))
}

// When the first holder of a CIDR two nodes hold goes, the block passes to
// the other holder: it is never free while a node holds it.
func TestRangeAllocatorPassesASharedBlockToTheOtherHolder(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/22"), nil, node("y", "10.0.0.0/24"), node("z", "10.0.0.0/24"))
	g.Expect(r.eventsSoFar()).To(ContainElement(ContainSubstring("Warning CIDRConflict node z holds 10.0.0.0/24")))
	r.delete(t, "y")
	g.Eventually(func() bool { return r.holds("y") }).Should(BeFalse(), "y's delete handled")
	r.create(t, node("n1"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "n1")).To(Equal([]string{"10.0.1.0/24"})) }).Should(Succeed())
	g.Expect(r.alloc.Status().Ranges[0].Used).To(Equal(uint64(2)), "z holds 10.0.0.0/24, n1 10.0.1.0/24")
	r.delete(t, "z")
	g.Eventually(func() uint64 { return r.alloc.Status().Ranges[0].Used }).Should(Equal(uint64(1)))
}

// served tells whether the allocator knows node name holds its CIDRs
// (patched, no claim pending).
func (r *rig) served(name string) bool {
	r.alloc.mu.Lock()
	defer r.alloc.mu.Unlock()
	h := r.alloc.held[name]
	return h != nil && !h.pending
}

// holds tells whether the allocator holds anything for node name.
func (r *rig) holds(name string) bool {
	r.alloc.mu.Lock()
	defer r.alloc.mu.Unlock()
	return r.alloc.held[name] != nil
}

// startInformer starts a node informer on client and waits until it
// watches: the fake clientset drops the events between an informer's list
// and its watch, which a real API server replays.
func startInformer(ctx context.Context, client *fake.Clientset) (informers.SharedInformerFactory, coreinformers.NodeInformer) {
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	nodes.Informer()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	select {
	case <-watching:
	case <-ctx.Done():
	}
	return factory, nodes
}

// A node deleted between New's list and Run is not in the informer's
// replay: Run still frees its block.
func TestRangeAllocatorFreesANodeDeletedBeforeRun(t *testing.T) {
	g := NewWithT(t)
	client := fake.NewClientset(node("y", "10.0.0.0/24"))
	ctx, cancel := context.WithCancel(context.Background())
	factory, nodes := startInformer(ctx, client)
	defer factory.Shutdown()
	defer cancel()
	a, err := New(ctx, Params{Client: client, Nodes: nodes, Config: testConfig("10.0.0.0/22"), Recorder: record.NewFakeRecorder(10)})
	g.Expect(err).NotTo(HaveOccurred())
	alloc := a.(*RangeAllocator)
	g.Expect(alloc.Status().Ranges[0].Used).To(Equal(uint64(1)))
	g.Expect(client.CoreV1().Nodes().Delete(ctx, "y", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() int { return len(nodes.Informer().GetStore().List()) }).Should(BeZero())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx.Done()) }()
	g.Eventually(func() uint64 { return alloc.Status().Ranges[0].Used }).Should(BeZero())
	cancel()
	<-done
}

// patches counts the node patches the client was sent.
func (r *rig) patches(name string) int {
	n := 0
	for _, a := range r.client.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetSubresource() == "" && pa.GetName() == name {
			n++
		}
	}
	return n
}

// A stale copy of a node that already got its CIDR (an update the informer
// delivered before the patch's) neither frees that CIDR nor patches again:
// found by tests/e2e, where the freed block went to another node.
func TestRangeAllocatorIgnoresAStaleCopyOfAServedNode(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/22"), nil)
	r.create(t, node("a"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "a")).To(Equal([]string{"10.0.0.0/24"})) }).Should(Succeed())
	// Served: the allocator has recorded its patch (the API shows the
	// patch a moment before; a copy arriving in between finds the claim
	// pending and patches the same CIDRs again, which is harmless).
	g.Eventually(func() bool { return r.served("a") }).Should(BeTrue())
	before := r.patches("a")
	g.Expect(r.alloc.AllocateOrOccupyCIDR(context.Background(), node("a"))).To(Succeed())
	g.Expect(r.patches("a")).To(Equal(before))
	g.Expect(r.alloc.Status().Ranges[0].Used).To(Equal(uint64(1)))
	r.create(t, node("b"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "b")).To(Equal([]string{"10.0.1.0/24"})) }).Should(Succeed())
	g.Expect(r.cidrsOf(g, "a")).To(Equal([]string{"10.0.0.0/24"}))
}

// A failed patch whose read-back fails too is retried, not dropped: found
// by tests/e2e (client-go's Get returns an empty Node with its error).
func TestRangeAllocatorRetriesWhenThePatchAndTheReadBackFail(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/22"), nil)
	var patchFail, getFail atomic.Int32
	patchFail.Store(1)
	getFail.Store(1)
	r.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if patchFail.Add(-1) >= 0 {
			return true, nil, apierrors.NewServiceUnavailable("injected patch")
		}
		return false, nil, nil
	})
	r.client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if getFail.Add(-1) >= 0 {
			return true, &v1.Node{}, apierrors.NewServiceUnavailable("injected get")
		}
		return false, nil, nil
	})
	r.create(t, node("n1"))
	gvr := v1.SchemeGroupVersion.WithResource("nodes")
	g.Eventually(func(g Gomega) { // read the tracker: a Get would take the injected failure
		obj, err := r.client.Tracker().Get(gvr, "", "n1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(obj.(*v1.Node).Spec.PodCIDRs).To(Equal([]string{"10.0.0.0/24"}))
	}).Should(Succeed())
	g.Eventually(func() []string { return r.alloc.Status().Pending }).Should(BeEmpty())
}
