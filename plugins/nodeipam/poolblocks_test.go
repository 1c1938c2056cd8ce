package nodeipam

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// The two test ranges: four /26 and four /120 blocks.
const (
	poolV4 = "10.64.0.0/24"
	poolV6 = "fd00:64::/118"
)

func TestPoolBlocksAClaimGetsItsBlocksInOrderAndASecondNodeOthers(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a", "b")
	s := r.start(t, poolConfig(poolV4, poolV6), nil)

	r.claim(t, "a", 2, 1)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal(
		[]string{"10.64.0.0/26", "10.64.0.64/26", "fd00:64::/120"}), "ipv4 first, next-fit, the block size of the family")
	r.claim(t, "b", 1, 2)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "b") }).Should(Equal(
		[]string{"10.64.0.128/26", "fd00:64::100/120", "fd00:64::200/120"}))

	// More wanted: appended, the held ones stay first.
	r.claim(t, "a", 3, 1)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal(
		[]string{"10.64.0.0/26", "10.64.0.64/26", "fd00:64::/120", "10.64.0.192/26"}))
	// Less wanted without a release: nothing shrinks.
	r.claim(t, "a", 0, 0)
	g.Consistently(func(g Gomega) []string { return r.grant(g, "a") }, "200ms").Should(HaveLen(4))

	g.Eventually(func() []string { return s.Status().Pending }).Should(BeEmpty())
	g.Expect(testutil.ToFloat64(s.metrics.granted.WithLabelValues("ipv4"))).To(Equal(4.0))
	g.Expect(testutil.ToFloat64(s.metrics.free.WithLabelValues("ipv4"))).To(Equal(0.0))
	g.Expect(testutil.ToFloat64(s.metrics.granted.WithLabelValues("ipv6"))).To(Equal(3.0))
	g.Expect(testutil.ToFloat64(s.metrics.free.WithLabelValues("ipv6"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(s.metrics.pending)).To(Equal(0.0))
	r.hist.check(t)
}

func TestPoolBlocksWantIsCappedByMaxBlocksPerNode(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a")
	cfg := poolConfig(poolV4)
	cfg.MaxBlocksPerNode = 2
	s := r.start(t, cfg, nil)
	r.claim(t, "a", 100, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal([]string{"10.64.0.0/26", "10.64.0.64/26"}))
	g.Eventually(func() []string { return s.Status().Pending }).Should(BeEmpty(), "capped is served, not pending")
	g.Expect(r.eventReasons()).To(BeEmpty())
}

// A released block is freed only once the grant without it is durable,
// and only then handed to the next claimant; the node that released it
// never gets it back while it lists it.
func TestPoolBlocksReleaseFreesAfterTheGrantWithoutIt(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a", "b")
	s := r.start(t, poolConfig(poolV4), nil)
	r.claim(t, "a", 4, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(HaveLen(4))

	r.claim(t, "b", 1, 0)
	g.Eventually(func() []string { return s.Status().Waiting }).Should(Equal([]string{"b"}))
	g.Eventually(r.eventReasons).Should(Equal([]string{ReasonPoolBlockNotAvailable}))
	g.Expect(testutil.ToFloat64(s.metrics.pending)).To(Equal(1.0))
	g.Expect(r.exists(g, grantKey("b"))).To(BeFalse())

	// a still wants 4 but releases one: it cannot get it back, so it
	// waits too, and b gets the block.
	r.claim(t, "a", 4, 0, "10.64.0.64/26")
	g.Eventually(func(g Gomega) []string { return r.grant(g, "b") }).Should(Equal([]string{"10.64.0.64/26"}))
	g.Expect(r.grant(g, "a")).To(Equal([]string{"10.64.0.0/26", "10.64.0.128/26", "10.64.0.192/26"}))
	g.Eventually(func() []string { return s.Status().Waiting }).Should(Equal([]string{"a"}))

	// b releases it and a, still listing it, does not get it back; once a
	// stops listing it, it does.
	r.claim(t, "b", 0, 0, "10.64.0.64/26")
	g.Eventually(func(g Gomega) []string { return r.grant(g, "b") }).Should(BeEmpty())
	g.Consistently(func(g Gomega) []string { return r.grant(g, "a") }, "200ms").Should(HaveLen(3))
	r.claim(t, "a", 4, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal(
		[]string{"10.64.0.0/26", "10.64.0.128/26", "10.64.0.192/26", "10.64.0.64/26"}))
	g.Eventually(func() []string { return s.Status().Pending }).Should(BeEmpty())
	r.hist.check(t) // every revision: the block was never in two grants
}

func TestPoolBlocksANodeGoneFromKubernetesFreesItsBlocks(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a", "b")
	s := r.start(t, poolConfig(poolV4), nil)
	r.claim(t, "a", 4, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(HaveLen(4))
	r.claim(t, "b", 2, 0)
	g.Eventually(func() []string { return s.Status().Waiting }).Should(Equal([]string{"b"}))

	r.deleteNode(t, "a")
	g.Eventually(func(g Gomega) {
		g.Expect(r.exists(g, grantKey("a"))).To(BeFalse())
		g.Expect(r.exists(g, claimKey("a"))).To(BeFalse())
		g.Expect(r.grant(g, "b")).To(Equal([]string{"10.64.0.0/26", "10.64.0.64/26"}))
	}).Should(Succeed())
	g.Expect(s.Status().Ranges[0].Used).To(Equal(uint64(2)))
	r.hist.check(t)
}

// A claim of a Node that the informer has not seen yet is served (the API
// is asked); a claim and a grant of a Node that does not exist go.
func TestPoolBlocksClaimsOfUnknownNodes(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t)
	putGrant(t, r.db, "ghost", "10.64.0.0/26")
	s := r.start(t, poolConfig(poolV4), nil)
	g.Eventually(func(g Gomega) bool { return r.exists(g, grantKey("ghost")) }).Should(BeFalse())
	g.Eventually(func() uint64 { return s.Status().Ranges[0].Used }).Should(BeZero())

	r.claim(t, "nobody", 1, 0)
	g.Eventually(func(g Gomega) bool { return r.exists(g, claimKey("nobody")) }).Should(BeFalse())
	g.Expect(r.exists(g, grantKey("nobody"))).To(BeFalse())
}

func putGrant(t *testing.T, db kvdb.Broker, node string, blocks ...string) {
	t.Helper()
	value := `{"node":"` + node + `","blocks":[`
	for i, b := range blocks {
		if i > 0 {
			value += ","
		}
		value += `"` + b + `"`
	}
	if err := db.Put(context.Background(), grantKey(node), []byte(value+"]}")); err != nil {
		t.Fatal(err)
	}
}

// A new server on the same etcd reads the grants back: it rewrites none
// and hands out none of their blocks.
func TestPoolBlocksARestartedServerKeepsTheGrants(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a", "b")
	first := r.start(t, poolConfig(poolV4, poolV6), nil)
	r.claim(t, "a", 2, 1)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(HaveLen(3))
	kv, _, err := r.db.Get(t.Context(), grantKey("a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.stop()).To(Succeed())

	second := r.start(t, poolConfig(poolV4, poolV6), nil)
	g.Expect(second.Status().Ranges[0].Used).To(Equal(uint64(2)), "read at Start, before anything runs")
	g.Expect(second.Status().Ranges[1].Used).To(Equal(uint64(1)))
	r.claim(t, "b", 2, 1)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "b") }).Should(Equal(
		[]string{"10.64.0.128/26", "10.64.0.192/26", "fd00:64::100/120"}))
	again, _, err := r.db.Get(t.Context(), grantKey("a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Revision).To(Equal(kv.Revision), "a's grant is not rewritten")
	r.hist.check(t)
}

// A block in two grants is kept by the first node in key order, reported,
// and never handed out until both have dropped it.
func TestPoolBlocksACorruptDoubleGrant(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a", "b", "c")
	r.hist.allow(netip.MustParsePrefix("10.64.0.0/26"))
	putGrant(t, r.db, "b", "10.64.0.0/26")
	putGrant(t, r.db, "a", "10.64.0.0/26", "10.64.0.64/26")
	s := r.start(t, poolConfig(poolV4), nil)
	g.Expect(s.Status().Ranges[0].Used).To(Equal(uint64(2)))
	g.Expect(r.eventReasons()).To(Equal([]string{ReasonPoolBlockConflict}))
	g.Expect(testutil.ToFloat64(s.metrics.failures.WithLabelValues(ReasonPoolBlockConflict))).To(Equal(1.0))

	r.claim(t, "c", 3, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "c") }).Should(Equal([]string{"10.64.0.128/26", "10.64.0.192/26"}))
	g.Eventually(func() []string { return s.Status().Waiting }).Should(Equal([]string{"c"}))

	// a releases it: b still holds it, so it is not free.
	r.claim(t, "a", 1, 0, "10.64.0.0/26")
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal([]string{"10.64.0.64/26"}))
	g.Consistently(func(g Gomega) []string { return r.grant(g, "c") }, "200ms").Should(HaveLen(2))

	// b goes: now it is free, and c gets it.
	r.deleteNode(t, "b")
	g.Eventually(func(g Gomega) []string { return r.grant(g, "c") }).Should(Equal(
		[]string{"10.64.0.128/26", "10.64.0.192/26", "10.64.0.0/26"}))
	r.hist.check(t)
}

func TestPoolBlocksAGrantThatCannotBeDecodedStopsTheStart(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t)
	g.Expect(r.db.Put(t.Context(), grantKey("a"), []byte(`{"node":"a","blocks":["10.64.0.0/33"]}`))).To(Succeed())
	s, err := NewPoolBlockServer(PoolBlockParams{DB: r.db, Client: r.client, Nodes: r.nodes, Config: poolConfig(poolV4), Log: r.log})
	g.Expect(err).NotTo(HaveOccurred())
	err = s.Start(t.Context())
	g.Expect(err).To(MatchError(ContainSubstring(grantKey("a"))))
	g.Expect(err).To(MatchError(ContainSubstring("10.64.0.0/33")))
}

// A replica whose leadership is gone writes nothing: its fenced write is
// refused and Run returns ErrLostLead.
func TestPoolBlocksALeaderThatLostTheLeaseWritesNothing(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a")
	ctx := t.Context()
	g.Expect(r.db.Put(ctx, "/leader", []byte("me"))).To(Succeed())
	fence := func() []kvdb.Cmp { return []kvdb.Cmp{kvdb.IfValue("/leader", []byte("me"))} }
	s := r.start(t, poolConfig(poolV4), fence)
	r.claim(t, "a", 1, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(HaveLen(1))

	g.Expect(r.db.Put(ctx, "/leader", []byte("another"))).To(Succeed())
	r.claim(t, "a", 2, 0)
	var err error
	g.Eventually(s.done).Should(Receive(&err))
	s.once.Do(func() {})
	g.Expect(errors.Is(err, ErrLostLead)).To(BeTrue(), "Run returned %v", err)
	g.Expect(r.grant(g, "a")).To(HaveLen(1), "nothing written after the lead was lost")

	// Nor does a new server with the lost fence: it never writes either.
	r.claim(t, "a", 3, 0)
	late := r.start(t, poolConfig(poolV4), fence)
	g.Eventually(late.done).Should(Receive(MatchError(ErrLostLead)))
	late.once.Do(func() {})
	g.Expect(r.grant(g, "a")).To(HaveLen(1))
}
