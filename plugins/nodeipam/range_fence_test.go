package nodeipam

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// fenceRig is a range allocator on a fake clientset, with its ledger and
// the agents' presence keys on a real etcd and its fences on a fake clock.
type fenceRig struct {
	db     kvdb.Broker
	client *fake.Clientset
	clk    *testingclock.FakeClock
	ledger *EtcdLedger
	agents *PresenceWatch
}

func newFenceRig(t *testing.T) *fenceRig {
	t.Helper()
	db := etcdBroker(t)
	clk := newFakeClock()
	r := &fenceRig{db: db, client: fake.NewClientset(), clk: clk, ledger: &EtcdLedger{DB: db, Prefix: DefaultClaimPrefix},
		agents: NewPresenceWatch(db, clk, testLogger(t))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.agents.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// start builds an allocator (a leader) on the rig and runs it until the
// returned stop or the test's end.
func (r *fenceRig) start(t *testing.T, cfg Config) (*RangeAllocator, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory, nodes := startInformer(ctx, r.client)
	a, err := New(ctx, Params{Client: r.client, Nodes: nodes, Config: cfg, Ledger: r.ledger, Agents: r.agents,
		AgentGrace: fenceGrace, Recorder: record.NewFakeRecorder(100), Log: testLogger(t)}, WithClock(r.clk))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx.Done()) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			factory.Shutdown()
		}
	}
	t.Cleanup(stop)
	return a.(*RangeAllocator), stop
}

func (r *fenceRig) create(t *testing.T, name string, cidrs ...string) {
	t.Helper()
	if _, err := r.client.CoreV1().Nodes().Create(context.Background(), node(name, cidrs...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *fenceRig) delete(t *testing.T, name string) {
	t.Helper()
	if err := r.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *fenceRig) cidrsOf(g Gomega, name string) []string {
	n, err := r.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return n.Spec.PodCIDRs
}

// record returns the ledger's record of node (nil if none).
func (r *fenceRig) record(g Gomega, node string) *Claim {
	claims, err := r.ledger.List(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	for i := range claims {
		if claims[i].Node == node {
			return &claims[i]
		}
	}
	return nil
}

// Node a is deleted while its agent still runs (presence key held) with
// pods in its pod CIDR, in a range that is then full: node c gets no CIDR
// while the key is held, whatever the time. Once the key has been gone
// for the grace period, c gets a's CIDR, and the ledger forgets the fence.
func TestRangeAllocatorFencesADeletedNodesCIDRWhileItsAgentRuns(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(t)
	agentUp(t, r.db, "a")
	r.create(t, "a", "10.0.0.0/24")
	r.create(t, "b", "10.0.1.0/24")
	alloc, _ := r.start(t, testConfig("10.0.0.0/23"))

	r.delete(t, "a")
	g.Eventually(func() []FencedNode { return alloc.Status().Fenced }).Should(ConsistOf(And(
		HaveField("Node", "a"), HaveField("Blocks", []string{"10.0.0.0/24"}), HaveField("Due", BeNil()))))
	g.Eventually(func(g Gomega) *Claim { return r.record(g, "a") }).Should(HaveField("Fenced", []string{"10.0.0.0/24"}),
		"the fence is in the ledger, for the next leader")
	g.Expect(testutil.ToFloat64(alloc.metrics.fenced.WithLabelValues("10.0.0.0/23"))).To(Equal(1.0))
	r.create(t, "c")
	g.Eventually(func() []string { return alloc.Status().Waiting }).Should(Equal([]string{"c"}))
	r.clk.Step(24 * time.Hour)
	g.Consistently(func(g Gomega) []string { return r.cidrsOf(g, "c") }, "300ms").Should(BeEmpty())

	agentDown(t, r.db, "a")
	g.Eventually(func() *time.Time { return alloc.Status().Fenced[0].Due }).Should(
		HaveValue(Equal(r.clk.Now().Add(fenceGrace))), "due one grace period after the key went")
	g.Expect(r.cidrsOf(g, "c")).To(BeEmpty())
	r.clk.Step(fenceGrace)
	g.Eventually(func(g Gomega) []string { return r.cidrsOf(g, "c") }).Should(Equal([]string{"10.0.0.0/24"}))
	g.Expect(alloc.Status().Fenced).To(BeEmpty())
	g.Eventually(func(g Gomega) *Claim { return r.record(g, "a") }).Should(BeNil())
	g.Expect(testutil.ToFloat64(alloc.metrics.fenced.WithLabelValues("10.0.0.0/23"))).To(BeZero())
}

// The fence outlives the leader: a new allocator reads it from the ledger
// and keeps the CIDR from every other node while the agent is present.
func TestRangeAllocatorANewLeaderKeepsTheFence(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(t)
	agentUp(t, r.db, "a")
	r.create(t, "a", "10.0.0.0/24")
	r.create(t, "b", "10.0.1.0/24")
	old, stopOld := r.start(t, testConfig("10.0.0.0/23"))
	r.delete(t, "a")
	g.Eventually(func(g Gomega) *Claim { return r.record(g, "a") }).Should(HaveField("Fenced", []string{"10.0.0.0/24"}))
	g.Expect(old.Status().Fenced).To(HaveLen(1))
	stopOld()

	fresh, _ := r.start(t, testConfig("10.0.0.0/23"))
	g.Expect(fresh.Status().Fenced).To(ConsistOf(HaveField("Blocks", []string{"10.0.0.0/24"})), "read at start")
	g.Expect(fresh.Status().Ranges[0].Used).To(Equal(uint64(2)))
	r.create(t, "c")
	g.Eventually(func() []string { return fresh.Status().Waiting }).Should(Equal([]string{"c"}))
	r.clk.Step(24 * time.Hour)
	g.Consistently(func(g Gomega) []string { return r.cidrsOf(g, "c") }, "300ms").Should(BeEmpty())

	agentDown(t, r.db, "a")
	g.Eventually(func() *time.Time { return fresh.Status().Fenced[0].Due }).ShouldNot(BeNil())
	r.clk.Step(fenceGrace)
	g.Eventually(func(g Gomega) []string { return r.cidrsOf(g, "c") }).Should(Equal([]string{"10.0.0.0/24"}))
}

// A Node deleted and created again (without CIDRs) while its agent runs
// gets its fenced CIDR back: the agent that serves the name keeps its pod
// subnet, and nothing stays fenced.
func TestRangeAllocatorANodeThatComesBackGetsItsFencedCIDR(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(t)
	agentUp(t, r.db, "a")
	r.create(t, "x", "10.0.0.0/24")
	r.create(t, "a", "10.0.1.0/24")
	alloc, _ := r.start(t, testConfig("10.0.0.0/22"))
	r.delete(t, "a")
	g.Eventually(func() []FencedNode { return alloc.Status().Fenced }).Should(HaveLen(1))

	n := node("a")
	n.UID = "uid-a-again"
	_, err := r.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) []string { return r.cidrsOf(g, "a") }).Should(Equal([]string{"10.0.1.0/24"}))
	g.Eventually(func() []FencedNode { return alloc.Status().Fenced }).Should(BeEmpty())
	g.Eventually(func(g Gomega) *Claim { return r.record(g, "a") }).Should(BeNil())
	g.Expect(alloc.Status().Ranges[0].Used).To(Equal(uint64(2)))
}

// A pending claim of a Node that is gone when a leader starts may have
// been patched onto the Node before it went: with its agent present, the
// new leader fences the claimed CIDR instead of freeing it.
func TestRangeAllocatorFencesThePendingClaimOfAGoneNode(t *testing.T) {
	g := NewWithT(t)
	r := newFenceRig(t)
	agentUp(t, r.db, "gone")
	g.Expect(r.ledger.Put(context.Background(), Claim{Node: "gone", UID: "uid-gone", CIDRs: []string{"10.0.0.0/24"}})).To(Succeed())
	r.create(t, "b", "10.0.1.0/24")
	alloc, _ := r.start(t, testConfig("10.0.0.0/23"))
	g.Expect(alloc.Status().Fenced).To(ConsistOf(And(HaveField("Node", "gone"), HaveField("Blocks", []string{"10.0.0.0/24"}))))
	g.Expect(r.record(g, "gone")).To(And(HaveField("Fenced", []string{"10.0.0.0/24"}), HaveField("CIDRs", BeEmpty())),
		"the record is a fence now, no longer a claim to patch")
	r.create(t, "c")
	g.Eventually(func() []string { return alloc.Status().Waiting }).Should(Equal([]string{"c"}))
	g.Consistently(func(g Gomega) []string { return r.cidrsOf(g, "c") }, "300ms").Should(BeEmpty())
}
