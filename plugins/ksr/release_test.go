package ksr

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// putID records node ID id for node name, as nodesync does.
func putID(t *testing.T, cli *clientv3.Client, id uint32, name string) {
	t.Helper()
	val, err := codec.Marshal(&vppnode.VppNode{Id: id, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(t.Context(), codec.KSRPrefix+vppnode.Key(id), string(val)); err != nil {
		t.Fatal(err)
	}
}

// hasID reports whether the record of id exists.
func hasID(t *testing.T, cli *clientv3.Client, id uint32) bool {
	return modRev(t, cli, vppnode.Key(id)) != 0
}

// pendingIDs lists the IDs p waits to free.
func pendingIDs(p *Plugin) []uint32 {
	var ids []uint32
	for _, r := range p.status.get().PendingNodeIDReleases {
		ids = append(ids, r.ID)
	}
	return ids
}

// A node ID is freed once its Node has been gone for the grace period,
// not a moment before; never while the node's agent is present; never
// when the Node came back.
func TestNodeIDsAreFreedAfterTheGracePeriodOnly(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	cli := srv.Client(t)
	ctx := t.Context()
	client := fake.NewClientset(testNode("n1", ""), testNode("n2", ""), testNode("n3", ""), testNode("n4", ""))
	for id, name := range map[uint32]string{1: "n1", 2: "n2", 3: "n3", 4: "n4"} {
		putID(t, cli, id, name)
	}
	_, err := cli.Put(ctx, vppnode.PresenceKey("n3"), "agent of n3") // n3's agent runs
	g.Expect(err).NotTo(HaveOccurred())
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	p := startKSR(t, db, client, "a", testConfig(), UseClock(clk))
	leading(t, p)
	g.Expect(pendingIDs(p)).To(BeEmpty(), "every node exists")

	for _, n := range []string{"n2", "n3", "n4"} {
		g.Expect(client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})).To(Succeed())
	}
	g.Eventually(func() []uint32 { return pendingIDs(p) }).WithTimeout(5 * time.Second).
		Should(ConsistOf(uint32(2), uint32(3), uint32(4)))
	g.Expect(p.status.get().PendingNodeIDReleases[0].Due).To(Equal(clk.Now().Add(time.Minute)))

	clk.Step(30 * time.Second)
	_, err = client.CoreV1().Nodes().Create(ctx, testNode("n4", ""), metav1.CreateOptions{}) // n4 is back
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int64 { return modRev(t, cli, "k8s/node/n4") }).WithTimeout(5 * time.Second).ShouldNot(BeZero())

	clk.Step(29 * time.Second) // one second before the end of the grace period
	g.Consistently(func() bool { return hasID(t, cli, 2) }).WithTimeout(300 * time.Millisecond).Should(BeTrue())
	// The timer fires at the due time; step in small increments so that a
	// timer armed while the test steps fires too.
	g.Eventually(func() bool {
		clk.Step(100 * time.Millisecond)
		return hasID(t, cli, 2)
	}).WithTimeout(5*time.Second).Should(BeFalse(), "n2's ID is freed after the grace period")
	// The counter moves right after the delete commits, on the loop.
	g.Eventually(func() float64 { return testutil.ToFloat64(p.metrics.releases) }).Should(BeEquivalentTo(1))
	g.Expect(hasID(t, cli, 1)).To(BeTrue(), "n1 exists")
	g.Expect(hasID(t, cli, 3)).To(BeTrue(), "n3's agent is present")
	g.Expect(hasID(t, cli, 4)).To(BeTrue(), "n4 came back")
	g.Eventually(func() []uint32 { return pendingIDs(p) }).Should(Equal([]uint32{3}), "n3 waits for its agent to go")
	g.Expect(p.status.get().PendingNodeIDReleases[0].Blocked).To(Equal(blockedReason))

	// Once n3's agent is gone, the next check (30s later: a blocked ID is
	// checked again every min(grace, 30s)) frees its ID.
	_, err = cli.Delete(ctx, vppnode.PresenceKey("n3"))
	g.Expect(err).NotTo(HaveOccurred())
	clk.Step(29 * time.Second)
	g.Consistently(func() bool { return hasID(t, cli, 3) }).WithTimeout(300 * time.Millisecond).Should(BeTrue())
	g.Eventually(func() bool {
		clk.Step(100 * time.Millisecond)
		return hasID(t, cli, 3)
	}).WithTimeout(5*time.Second).Should(BeFalse(), "freed at the recheck after its agent went")
	g.Eventually(func() float64 { return testutil.ToFloat64(p.metrics.releases) }).Should(BeEquivalentTo(2))
}

// The delete compares the record's revision: a record rewritten after it
// was listed (the node's agent came back and re-asserted its ID) is not
// freed.
func TestARecordRewrittenAfterTheListingIsNotFreed(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	cli := srv.Client(t)
	putID(t, cli, 7, "n7")
	lead, err := db.Campaign(t.Context(), "/test/election", []byte("a"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	r := &releaser{db: db, nodes: newResources(informersFor(t), PodLayoutNode)[0].informer.GetStore(), absence: newAbsence(),
		grace: time.Minute, clock: testingclock.NewFakeClock(time.Now()), metrics: newKSRMetrics(), log: testLog(t)}
	records, err := r.records(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(records).To(HaveLen(1))

	putID(t, cli, 7, "n7") // rewritten: a new mod revision
	g.Expect(r.release(t.Context(), lead.Fence(), records[0], time.Now())).To(BeFalse())
	g.Expect(hasID(t, cli, 7)).To(BeTrue())

	records, err = r.records(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lead.Resign(t.Context())).To(Succeed())
	g.Expect(r.release(t.Context(), lead.Fence(), records[0], time.Now())).To(BeFalse())
	g.Expect(hasID(t, cli, 7)).To(BeTrue(), "a replica that no longer leads frees nothing")

	lead, err = db.Campaign(t.Context(), "/test/election", []byte("a"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.release(t.Context(), lead.Fence(), records[0], time.Now())).To(BeTrue())
	g.Expect(hasID(t, cli, 7)).To(BeFalse(), "unchanged, leading, no agent: freed")
	g.Expect(testutil.ToFloat64(r.metrics.releases)).To(BeEquivalentTo(1))
}
