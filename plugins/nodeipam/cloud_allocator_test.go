package nodeipam

import (
	"context"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
)

// cloudRig is a cloud allocator on a fake clientset with a running
// informer, Run running until stop is closed.
type cloudRig struct {
	client  *fake.Clientset
	cloud   *MemCloud
	events  *record.FakeRecorder
	alloc   CIDRAllocator
	stop    chan struct{}
	stopped chan struct{}
}

type buildFunc func(ctx context.Context, p Params, nodes *v1.NodeList) (CIDRAllocator, error)

// viaNew builds through New, as contiv-ksr does.
func viaNew(ctx context.Context, p Params, _ *v1.NodeList) (CIDRAllocator, error) { return New(ctx, p) }

func newCloudRig(t *testing.T, cfg Config, cloud *MemCloud, build buildFunc, nodes ...*v1.Node) *cloudRig {
	t.Helper()
	objs := make([]runtime.Object, len(nodes))
	for i, n := range nodes {
		objs[i] = n
	}
	r := &cloudRig{client: fake.NewClientset(objs...), cloud: cloud, events: record.NewFakeRecorder(1000),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	factory := informers.NewSharedInformerFactory(r.client, 0)
	nodeInf := factory.Core().V1().Nodes()
	nodeInf.Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	list, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.alloc, err = build(ctx, Params{Client: r.client, Nodes: nodeInf, Config: cfg, Cloud: cloud,
		Recorder: r.events, Log: testLogger(t)}, list)
	if err != nil {
		t.Fatal(err)
	}
	go func() { defer close(r.stopped); r.alloc.Run(r.stop) }()
	t.Cleanup(r.shutdown)
	return r
}

// shutdown stops Run and waits for it (idempotent).
func (r *cloudRig) shutdown() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.stopped
}

func (r *cloudRig) cidrsOf(g Gomega, name string) []string {
	n, err := r.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return n.Spec.PodCIDRs
}

func (r *cloudRig) rangesOf(g Gomega, name string) []netip.Prefix {
	got, err := r.cloud.NodeRanges(context.Background(), name)
	g.Expect(err).NotTo(HaveOccurred())
	return got
}

func (r *cloudRig) create(t *testing.T, n *v1.Node) {
	t.Helper()
	if _, err := r.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func cloudConfig(typ CIDRAllocatorType, clusters ...string) Config {
	c := testConfig(clusters...)
	c.AllocatorType = typ
	return c
}

func TestIPAMFromClusterAllocatesWritesTheCloudAndReleases(t *testing.T) {
	g := NewWithT(t)
	cfg := cloudConfig(IPAMFromClusterAllocatorType, "10.0.0.0/16")
	r := newCloudRig(t, cfg, NewMemCloud(), viaNew, node("a", "10.0.0.0/24"), node("b"))
	c := r.alloc.(*IPAMController)

	// a's block was occupied from the list before b was handed one.
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "b")).To(Equal([]string{"10.0.1.0/24"})) }).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(r.rangesOf(g, "b")).To(Equal(mustPrefixes("10.0.1.0/24"))) }).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(r.rangesOf(g, "a")).To(Equal(mustPrefixes("10.0.0.0/24"))) }).Should(Succeed())
	r.create(t, node("c"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "c")).To(Equal([]string{"10.0.2.0/24"})) }).Should(Succeed())
	g.Expect(c.live.Load()).To(Equal(int64(3)))

	g.Expect(r.client.CoreV1().Nodes().Delete(t.Context(), "b", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(c.live.Load).Should(Equal(int64(2)), "b's loop ends")
	g.Eventually(c.s.sets.used).Should(Equal([]uint64{2}))
	g.Expect(r.rangesOf(g, "b")).To(BeEmpty())

	r.shutdown()
	g.Expect(c.live.Load()).To(BeZero(), "Run returns after its loops")
	g.Expect(c.AllocateOrOccupyCIDR(t.Context(), node("d"))).To(MatchError(errStopped))
	g.Expect(reasons(r.events)).To(BeEmpty())
}

func TestIPAMFromCloudCopiesTheCloudsRanges(t *testing.T) {
	g := NewWithT(t)
	cloud := NewMemCloud()
	g.Expect(cloud.SetNodeRanges(t.Context(), "a", mustPrefixes("10.0.9.0/24", "fd00:0:0:9::/64"))).To(Succeed())
	cfg := cloudConfig(IPAMFromCloudAllocatorType)
	r := newCloudRig(t, cfg, cloud, viaNew, node("a"))
	g.Eventually(func(g Gomega) {
		g.Expect(r.cidrsOf(g, "a")).To(Equal([]string{"10.0.9.0/24", "fd00:0:0:9::/64"}))
	}).Should(Succeed())

	r.create(t, node("b"))
	g.Eventually(r.events.Events).Should(Receive(ContainSubstring(ReasonCIDRNotAvailable)))
	g.Expect(cloud.SetNodeRanges(t.Context(), "b", mustPrefixes("10.0.10.0/24"))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "b")).To(Equal([]string{"10.0.10.0/24"})) }).Should(Succeed())
}

func TestCloudAllocatorsNeedACloud(t *testing.T) {
	for _, typ := range []CIDRAllocatorType{CloudAllocatorType, IPAMFromClusterAllocatorType, IPAMFromCloudAllocatorType} {
		t.Run(string(typ), func(t *testing.T) {
			g := NewWithT(t)
			client := fake.NewClientset()
			nodes := informers.NewSharedInformerFactory(client, 0).Core().V1().Nodes()
			a, err := New(t.Context(), Params{Client: client, Nodes: nodes, Config: cloudConfig(typ, "10.0.0.0/16")})
			g.Expect(err).To(MatchError(And(ContainSubstring("Params.Cloud is nil"), ContainSubstring(string(typ)))))
			g.Expect(a).To(BeNil())
		})
	}
}

func TestCloudAllocatorCopiesTheCloudOnce(t *testing.T) {
	g := NewWithT(t)
	cloud := NewMemCloud()
	g.Expect(cloud.SetNodeRanges(t.Context(), "a", mustPrefixes("10.0.9.0/24"))).To(Succeed())
	g.Expect(cloud.SetNodeRanges(t.Context(), "b", mustPrefixes("10.0.8.0/24"))).To(Succeed())
	g.Expect(cloud.SetNodeRanges(t.Context(), "c", mustPrefixes("192.168.1.0/24"))).To(Succeed())
	r := newCloudRig(t, cloudConfig(CloudAllocatorType, "10.0.0.0/16"), cloud, viaNew, node("a"), node("b", "10.0.3.0/24"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "a")).To(Equal([]string{"10.0.9.0/24"})) }).Should(Succeed())
	r.create(t, node("c"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "c")).To(Equal([]string{"192.168.1.0/24"})) }).Should(Succeed())
	g.Expect(reasons(r.events)).To(Equal([]string{ReasonCIDROutOfRange}), "c's range is set, and reported")
	g.Expect(r.cidrsOf(g, "b")).To(Equal([]string{"10.0.3.0/24"}), "a node with CIDRs is left as it is")
}

func TestCloudAllocatorRetriesAnEmptyCloudWithBackoff(t *testing.T) {
	g := NewWithT(t)
	clk := newRecClock()
	cfg := cloudConfig(CloudAllocatorType)
	cfg.InitialRetry, cfg.MaxBackoff = time.Second, 5*time.Second
	cloud := NewMemCloud()
	build := func(ctx context.Context, p Params, nodes *v1.NodeList) (CIDRAllocator, error) {
		return asAllocator(NewCloudCIDRAllocator(ctx, p, nodes, WithClock(clk)))
	}
	r := newCloudRig(t, cfg, cloud, build, node("n"))
	limiter := r.alloc.(*CloudAllocator).limiter

	g.Eventually(func() int { return limiter.NumRequeues("n") }).Should(Equal(1))
	g.Expect(reasons(r.events)).To(Equal([]string{ReasonCIDRNotAvailable}))
	// Step only once the queue has set its timer for the retry: its
	// counter moves first, and a step before the timer pushes the retry
	// out of reach.
	g.Eventually(clk.waits).Should(Receive(Equal(time.Second)))
	clk.Step(time.Second)
	g.Eventually(func() int { return limiter.NumRequeues("n") }).Should(Equal(2))
	g.Eventually(clk.waits).Should(Receive(Equal(2 * time.Second)))
	g.Expect(cloud.Calls(CloudOpGet)).To(Equal(2))
	g.Expect(reasons(r.events)).To(BeEmpty(), "the warning is not repeated")

	g.Expect(cloud.SetNodeRanges(t.Context(), "n", mustPrefixes("10.0.4.0/24"))).To(Succeed())
	clk.Step(time.Second)
	g.Expect(cloud.Calls(CloudOpGet)).To(Equal(2), "the second retry waits 2s")
	clk.Step(time.Second)
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "n")).To(Equal([]string{"10.0.4.0/24"})) }).Should(Succeed())
	g.Eventually(func() int { return limiter.NumRequeues("n") }).Should(BeZero())
	g.Eventually(r.events.Events).Should(Receive(ContainSubstring(ReasonCIDRAssigned)))
}

// IPAMFromCluster after a takeover: a node whose ranges reached the cloud
// but whose patch did not land gets those ranges, and nobody else does,
// though its loop may run after another node's.
func TestIPAMFromClusterFinishesTheAllocationsOfTheLeaderBefore(t *testing.T) {
	g := NewWithT(t)
	cloud := NewMemCloud()
	g.Expect(cloud.SetNodeRanges(t.Context(), "late", mustPrefixes("10.0.0.0/24"))).To(Succeed())
	cfg := cloudConfig(IPAMFromClusterAllocatorType, "10.0.0.0/16")
	r := newCloudRig(t, cfg, cloud, viaNew, node("late"), node("fresh"))
	g.Eventually(func(g Gomega) {
		g.Expect(r.cidrsOf(g, "late")).To(Equal([]string{"10.0.0.0/24"}))
		g.Expect(r.cidrsOf(g, "fresh")).To(Equal([]string{"10.0.1.0/24"}))
	}).Should(Succeed())
	g.Expect(reasons(r.events)).To(BeEmpty())
}

// WithSyncReport tells the outcome of every run of a node's loop and its
// release, once each, in order.
func TestWithSyncReportTellsEveryRunAndTheRelease(t *testing.T) {
	g := NewWithT(t)
	type report struct {
		node string
		err  error
	}
	reports := make(chan report, 10)
	client := fake.NewClientset(node("n"))
	nodes := informers.NewSharedInformerFactory(client, 0).Core().V1().Nodes() // not started: the test hands the node in
	cloud := NewMemCloud()
	c, err := NewIPAMController(t.Context(), Params{Client: client, Nodes: nodes, Config: cloudConfig(IPAMFromCloudAllocatorType, "10.0.0.0/16"),
		Cloud: cloud, Recorder: record.NewFakeRecorder(10), Log: testLogger(t)}, SyncFromCloud, nil,
		WithClock(testingclock.NewFakeClock(time.Now())), WithSyncReport(func(n string, err error) { reports <- report{n, err} }))
	g.Expect(err).NotTo(HaveOccurred())
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); c.Run(stop) }()
	t.Cleanup(func() { close(stop); <-done })

	g.Expect(c.AllocateOrOccupyCIDR(t.Context(), node("n"))).To(Succeed())
	var r report
	g.Eventually(reports).Should(Receive(&r))
	g.Expect(r.node).To(Equal("n"))
	g.Expect(r.err).To(MatchError(ErrNoCloudRanges))

	g.Expect(cloud.SetNodeRanges(t.Context(), "n", mustPrefixes("10.0.4.0/24"))).To(Succeed())
	g.Expect(c.AllocateOrOccupyCIDR(t.Context(), node("n"))).To(Succeed())
	g.Eventually(reports).Should(Receive(Equal(report{"n", nil})))
	g.Expect(c.ReleaseCIDR(t.Context(), node("n", "10.0.4.0/24"))).To(Succeed())
	g.Eventually(reports).Should(Receive(Equal(report{"n", nil})))
	g.Consistently(reports, 100*time.Millisecond).ShouldNot(Receive(), "one report per run")
}
