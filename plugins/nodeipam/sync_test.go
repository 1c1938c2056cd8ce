package nodeipam

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// recClock is a fake clock that reports the duration of every timer made,
// once the timer is armed.
type recClock struct {
	*testingclock.FakeClock
	waits chan time.Duration
}

func newRecClock() *recClock {
	return &recClock{FakeClock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		waits: make(chan time.Duration, 100)}
}

func (c *recClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.waits <- d
	return t
}

// syncRig is a syncer on a fake clientset, a MemCloud and a recClock.
type syncRig struct {
	client      *fake.Clientset
	cloud       *MemCloud
	events      *record.FakeRecorder
	s           *syncer
	clk         *recClock
	patchFaults atomic.Bool // the node patches fail while true
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newSyncRig(t *testing.T, mode SyncMode, cfg Config, nodes ...*v1.Node) *syncRig {
	t.Helper()
	objs := make([]runtime.Object, len(nodes))
	for i, n := range nodes {
		objs[i] = n
	}
	r := &syncRig{client: fake.NewClientset(objs...), cloud: NewMemCloud(), events: record.NewFakeRecorder(100), clk: newRecClock()}
	r.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if r.patchFaults.Load() {
			return true, nil, errors.New("API server unreachable")
		}
		return false, nil, nil
	})
	cfg.AllocatorType = IPAMFromCloudAllocatorType
	if mode == SyncFromCluster {
		cfg.AllocatorType = IPAMFromClusterAllocatorType
	}
	metrics := NewMetrics()
	sets, err := newSyncSets(cfg, metrics)
	if err != nil {
		t.Fatal(err)
	}
	r.s = &syncer{mode: mode, kube: newKube(r.client, r.events, testLogger(t)), cloud: r.cloud, sets: sets,
		metrics: metrics, log: testLogger(t), clock: r.clk,
		timing: Timeout{Resync: cfg.Resync, MaxBackoff: cfg.MaxBackoff, InitialRetry: cfg.InitialRetry},
		get: func(name string) (*v1.Node, error) {
			return r.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		}}
	return r
}

func (r *syncRig) node(g Gomega, name string) *v1.Node {
	n, err := r.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return n
}

// reasons drains the events and returns their reasons.
func reasons(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

// syncCase is a node and the cloud before one run, and what follows.
type syncCase struct {
	name                string
	mode                SyncMode
	clusters            []string
	node, cloud         []string
	wantErr             error
	wantNode, wantCloud []string
	wantEvents          []string
	wantUsed            []uint64
}

// syncCases are the four cases of a run, in both modes, IPv4 and
// dual-stack.
func syncCases() []syncCase {
	v4, dual := []string{"10.0.0.0/16"}, []string{"10.0.0.0/16", "fd00::/48"}
	return []syncCase{
		{name: "neither, from cluster", mode: SyncFromCluster, clusters: v4,
			wantNode: []string{"10.0.0.0/24"}, wantCloud: []string{"10.0.0.0/24"}, wantUsed: []uint64{1}},
		{name: "neither, from cluster, dual-stack", mode: SyncFromCluster, clusters: dual,
			wantNode: []string{"10.0.0.0/24", "fd00::/64"}, wantCloud: []string{"10.0.0.0/24", "fd00::/64"}, wantUsed: []uint64{1, 1}},
		{name: "neither, from cloud: wait for the cloud", mode: SyncFromCloud, clusters: v4,
			wantErr: ErrNoCloudRanges, wantEvents: []string{ReasonCIDRNotAvailable}, wantUsed: []uint64{0}},
		{name: "cloud only, from cloud", mode: SyncFromCloud, clusters: v4, cloud: []string{"10.0.5.0/24"},
			wantNode: []string{"10.0.5.0/24"}, wantCloud: []string{"10.0.5.0/24"}, wantUsed: []uint64{1}},
		{name: "cloud only, from cloud, dual-stack", mode: SyncFromCloud, clusters: dual, cloud: []string{"fd00:0:0:7::/64", "10.0.5.0/24"},
			wantNode: []string{"fd00:0:0:7::/64", "10.0.5.0/24"}, wantCloud: []string{"fd00:0:0:7::/64", "10.0.5.0/24"}, wantUsed: []uint64{1, 1}},
		{name: "cloud only, from cloud, outside the cluster ranges: not set on the node", mode: SyncFromCloud, clusters: v4, cloud: []string{"192.168.0.0/24"},
			wantErr: ErrOutsideCluster, wantCloud: []string{"192.168.0.0/24"}, wantEvents: []string{ReasonCIDROutOfRange}, wantUsed: []uint64{0}},
		{name: "cloud only, from cloud, dual-stack, one outside: neither set", mode: SyncFromCloud, clusters: dual, cloud: []string{"10.0.5.0/24", "fd01::/64"},
			wantErr: ErrOutsideCluster, wantCloud: []string{"10.0.5.0/24", "fd01::/64"}, wantEvents: []string{ReasonCIDROutOfRange}, wantUsed: []uint64{0, 0}},
		{name: "cloud only, from cloud, covering the cluster range: set, every block taken (as Kubernetes)", mode: SyncFromCloud, clusters: v4,
			cloud: []string{"10.0.0.0/8"}, wantNode: []string{"10.0.0.0/8"}, wantCloud: []string{"10.0.0.0/8"}, wantUsed: []uint64{256}},
		{name: "cloud only, from cloud, no cluster ranges", mode: SyncFromCloud, cloud: []string{"192.168.0.0/24"},
			wantNode: []string{"192.168.0.0/24"}, wantCloud: []string{"192.168.0.0/24"}, wantUsed: []uint64{}},
		{name: "cloud only, from cluster: a free block is adopted", mode: SyncFromCluster, clusters: v4, cloud: []string{"10.0.5.0/24"},
			wantNode: []string{"10.0.5.0/24"}, wantCloud: []string{"10.0.5.0/24"}, wantUsed: []uint64{1}},
		{name: "cloud only, from cluster, outside: invalid mode", mode: SyncFromCluster, clusters: v4, cloud: []string{"192.168.5.0/24"},
			wantErr: ErrInvalidMode, wantCloud: []string{"192.168.5.0/24"}, wantEvents: []string{ReasonInvalidMode}, wantUsed: []uint64{0}},
		{name: "cloud only, from cluster, not one block: invalid mode", mode: SyncFromCluster, clusters: v4, cloud: []string{"10.0.4.0/23"},
			wantErr: ErrInvalidMode, wantCloud: []string{"10.0.4.0/23"}, wantEvents: []string{ReasonInvalidMode}, wantUsed: []uint64{0}},
		{name: "node only, from cluster", mode: SyncFromCluster, clusters: dual, node: []string{"10.0.3.0/24", "fd00:0:0:3::/64"},
			wantNode: []string{"10.0.3.0/24", "fd00:0:0:3::/64"}, wantCloud: []string{"10.0.3.0/24", "fd00:0:0:3::/64"}, wantUsed: []uint64{1, 1}},
		{name: "cloud only, from cloud, covering the cluster range from before it: set, every block taken (as Kubernetes)", mode: SyncFromCloud,
			clusters: []string{"10.0.16.0/20"}, cloud: []string{"10.0.0.0/16"}, wantNode: []string{"10.0.0.0/16"}, wantCloud: []string{"10.0.0.0/16"},
			wantUsed: []uint64{16}},
		{name: "node only, from cluster, outside the cluster ranges: not written to the cloud", mode: SyncFromCluster, clusters: v4, node: []string{"192.168.3.0/24"},
			wantErr: ErrOutsideCluster, wantNode: []string{"192.168.3.0/24"}, wantEvents: []string{ReasonCIDROutOfRange}, wantUsed: []uint64{0}},
		{name: "node only, from cloud: invalid mode", mode: SyncFromCloud, clusters: v4, node: []string{"10.0.3.0/24"},
			wantErr: ErrInvalidMode, wantNode: []string{"10.0.3.0/24"}, wantEvents: []string{ReasonInvalidMode}, wantUsed: []uint64{1}},
		{name: "both equal, from cluster", mode: SyncFromCluster, clusters: dual, node: []string{"10.0.3.0/24", "fd00:0:0:3::/64"},
			cloud: []string{"fd00:0:0:3::/64", "10.0.3.0/24"}, wantNode: []string{"10.0.3.0/24", "fd00:0:0:3::/64"},
			wantCloud: []string{"fd00:0:0:3::/64", "10.0.3.0/24"}, wantUsed: []uint64{1, 1}},
		{name: "both equal, from cloud", mode: SyncFromCloud, clusters: v4, node: []string{"10.0.3.0/24"}, cloud: []string{"10.0.3.0/24"},
			wantNode: []string{"10.0.3.0/24"}, wantCloud: []string{"10.0.3.0/24"}, wantUsed: []uint64{1}},
		{name: "both differ, from cluster: mismatch", mode: SyncFromCluster, clusters: v4, node: []string{"10.0.3.0/24"}, cloud: []string{"10.0.4.0/24"},
			wantNode: []string{"10.0.3.0/24"}, wantCloud: []string{"10.0.4.0/24"}, wantEvents: []string{ReasonMismatch}, wantUsed: []uint64{1}},
		{name: "both differ, from cloud: mismatch", mode: SyncFromCloud, clusters: dual, node: []string{"10.0.3.0/24"},
			cloud: []string{"10.0.3.0/24", "fd00::/64"}, wantNode: []string{"10.0.3.0/24"}, wantCloud: []string{"10.0.3.0/24", "fd00::/64"},
			wantEvents: []string{ReasonMismatch}, wantUsed: []uint64{1, 0}},
	}
}

func TestNodeSyncRunsTheFourCasesInBothModes(t *testing.T) {
	for _, tc := range syncCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := newSyncRig(t, tc.mode, testConfig(tc.clusters...), node("n", tc.node...))
			g.Expect(r.cloud.SetNodeRanges(t.Context(), "n", mustPrefixes(tc.cloud...))).To(Succeed())
			n := newNodeSync(r.s, "n", nil)

			err := n.run(t.Context(), nil)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(r.node(g, "n").Spec.PodCIDRs).To(Equal(nilIfEmpty(tc.wantNode)))
			g.Expect(r.cloud.NodeRanges(t.Context(), "n")).To(Equal(mustPrefixes(tc.wantCloud...)))
			g.Expect(reasons(r.events)).To(Equal(tc.wantEvents))
			g.Expect(r.s.sets.used()).To(Equal(tc.wantUsed))
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestNodeSyncWarnsOnceWhileTheCauseLasts(t *testing.T) {
	g := NewWithT(t)
	r := newSyncRig(t, SyncFromCluster, testConfig("10.0.0.0/16"), node("n", "10.0.3.0/24"))
	g.Expect(r.cloud.SetNodeRanges(t.Context(), "n", mustPrefixes("10.0.4.0/24"))).To(Succeed())
	n := newNodeSync(r.s, "n", nil)
	for range 3 {
		g.Expect(n.run(t.Context(), nil)).To(Succeed())
	}
	g.Expect(reasons(r.events)).To(Equal([]string{ReasonMismatch}))

	g.Expect(r.cloud.SetNodeRanges(t.Context(), "n", mustPrefixes("10.0.3.0/24"))).To(Succeed())
	g.Expect(n.run(t.Context(), nil)).To(Succeed())
	g.Expect(r.cloud.SetNodeRanges(t.Context(), "n", mustPrefixes("10.0.4.0/24"))).To(Succeed())
	g.Expect(n.run(t.Context(), nil)).To(Succeed())
	g.Expect(reasons(r.events)).To(Equal([]string{ReasonMismatch}), "a mismatch that comes back is reported again")
}

func TestNodeSyncFromClusterFinishesItsOwnAllocation(t *testing.T) {
	g := NewWithT(t)
	r := newSyncRig(t, SyncFromCluster, testConfig("10.0.0.0/16"), node("n"))
	n := newNodeSync(r.s, "n", nil)

	// The cloud write fails: the CIDRs stay reserved for the next try.
	r.cloud.SetFault(func(op, _ string) error {
		if op == CloudOpSet {
			return errors.New("cloud down")
		}
		return nil
	})
	g.Expect(n.run(t.Context(), nil)).To(MatchError(ContainSubstring("cloud down")))
	g.Expect(r.s.sets.used()).To(Equal([]uint64{1}))

	// The cloud write lands but the patch fails: the cloud has our CIDRs,
	// the node none.
	r.cloud.SetFault(nil)
	r.patchFaults.Store(true)
	g.Expect(n.run(t.Context(), nil)).To(MatchError(ContainSubstring("API server unreachable")))
	g.Expect(r.cloud.NodeRanges(t.Context(), "n")).To(Equal(mustPrefixes("10.0.0.0/24")))

	// Not an invalid mode: the loop patches the CIDRs it wrote.
	r.patchFaults.Store(false)
	g.Expect(n.run(t.Context(), nil)).To(Succeed())
	g.Expect(r.node(g, "n").Spec.PodCIDRs).To(Equal([]string{"10.0.0.0/24"}))
	g.Expect(r.s.sets.used()).To(Equal([]uint64{1}))
	g.Expect(reasons(r.events)).To(BeEmpty())
}

// startLoop runs n's loop until the test ends (or the loop does).
func startLoop(t *testing.T, n *nodeSync) {
	ctx, cancel := context.WithCancel(context.Background())
	go n.loop(ctx)
	t.Cleanup(func() { cancel(); <-n.done })
}

func TestNodeSyncLoopBacksOffThenResyncs(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig("10.0.0.0/16")
	cfg.Resync, cfg.InitialRetry, cfg.MaxBackoff = 30*time.Second, time.Second, 5*time.Second
	r := newSyncRig(t, SyncFromCloud, cfg, node("n"))
	g.Expect(r.cloud.SetNodeRanges(t.Context(), "n", mustPrefixes("10.0.7.0/24"))).To(Succeed())
	var failing atomic.Bool
	failing.Store(true)
	r.cloud.SetFault(func(string, string) error {
		if failing.Load() {
			return errors.New("cloud down")
		}
		return nil
	})

	n := newNodeSync(r.s, "n", nil)
	startLoop(t, n)
	g.Eventually(r.clk.waits).Should(Receive(Equal(cfg.Resync)), "the first wait, before any run")
	n.update(nil)
	// Five runs fail (the update, then four timeouts); the sixth succeeds.
	backoff := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, want := range backoff {
		g.Eventually(r.clk.waits).Should(Receive(Equal(want)), "after failed run %d", i+1)
		g.Expect(r.clk.waits).NotTo(Receive(), "one timer per run")
		g.Expect(r.cloud.Calls(CloudOpGet)).To(Equal(i + 1))
		if i == len(backoff)-1 {
			failing.Store(false)
		}
		r.clk.Step(want)
	}
	g.Eventually(r.clk.waits).Should(Receive(Equal(cfg.Resync)), "back to resync after a success")
	g.Expect(r.cloud.Calls(CloudOpGet)).To(Equal(6))
	g.Expect(r.node(g, "n").Spec.PodCIDRs).To(Equal([]string{"10.0.7.0/24"}))
	r.clk.Step(cfg.Resync)
	g.Eventually(r.clk.waits).Should(Receive(Equal(cfg.Resync)), "a resync that succeeds waits resync again")
	g.Expect(r.cloud.Calls(CloudOpGet)).To(Equal(7))
}

func TestNodeSyncLoopEndsOnDeleteAndReleases(t *testing.T) {
	for _, mode := range []SyncMode{SyncFromCluster, SyncFromCloud} {
		t.Run(string(mode), func(t *testing.T) {
			g := NewWithT(t)
			r := newSyncRig(t, mode, testConfig("10.0.0.0/16"), node("n", "10.0.3.0/24"))
			g.Expect(r.cloud.SetNodeRanges(t.Context(), "n", mustPrefixes("10.0.3.0/24"))).To(Succeed())
			n := newNodeSync(r.s, "n", nil)
			startLoop(t, n)
			n.update(nil)
			g.Eventually(r.s.sets.used).Should(Equal([]uint64{1}))
			n.remove(node("n", "10.0.3.0/24"))
			g.Eventually(n.done).Should(BeClosed())
			g.Expect(r.s.sets.used()).To(Equal([]uint64{0}))
			want := mustPrefixes("10.0.3.0/24")
			if mode == SyncFromCluster {
				want = []netip.Prefix{} // the cluster wrote it; the cluster removes it
			}
			g.Expect(r.cloud.NodeRanges(t.Context(), "n")).To(Equal(want))
		})
	}
}
