package nodeipam

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// fenceGrace is the grace period of the fence tests, on a fake clock.
const fenceGrace = 30 * time.Second

func newFakeClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// agentUp writes node's presence key, as its agent does while it runs;
// agentDown deletes it, as etcd does when the agent's lease ends.
func agentUp(t *testing.T, db kvdb.Broker, node string) {
	t.Helper()
	if err := db.Put(context.Background(), vppnode.PresenceKey(node), []byte(`{"node":"`+node+`"}`)); err != nil {
		t.Fatal(err)
	}
}

func agentDown(t *testing.T, db kvdb.Broker, node string) {
	t.Helper()
	if _, err := db.Delete(context.Background(), vppnode.PresenceKey(node)); err != nil {
		t.Fatal(err)
	}
}

// fenceOf returns the status of node's fence, nil if it has none.
func fenceOf(fenced []FencedNode, node string) *FencedNode {
	for i := range fenced {
		if fenced[i].Node == node {
			return &fenced[i]
		}
	}
	return nil
}

// Node a is deleted while its agent still runs (presence key held) with
// pods in its blocks. No block of a goes to b while the key is held,
// whatever the time; a block a's agent gives back (empty) goes to b at
// once; the rest goes to b only once the key has been gone for the grace
// period, and then a's grant and claim are deleted.
func TestPoolBlocksADeletedNodeWithALiveAgentStaysFenced(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a", "b")
	clk := newFakeClock()
	r.clock, r.grace = clk, fenceGrace
	agentUp(t, r.db, "a")
	agentUp(t, r.db, "b")
	s := r.start(t, poolConfig(poolV4), nil)
	r.claim(t, "a", 4, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(HaveLen(4))
	r.claim(t, "b", 2, 0)
	g.Eventually(func() []string { return s.Status().Waiting }).Should(Equal([]string{"b"}))

	r.deleteNode(t, "a")
	g.Eventually(func() *FencedNode { return fenceOf(s.Status().Fenced, "a") }).Should(And(
		Not(BeNil()), HaveField("Due", BeNil()), HaveField("Blocks", HaveLen(4))), "fenced while the key is held: no due time")
	g.Expect(testutil.ToFloat64(s.metrics.fenced.WithLabelValues("ipv4"))).To(Equal(4.0))
	clk.Step(24 * time.Hour)
	r.claim(t, "a", 5, 0) // the agent asks for more: a gone node gets none
	g.Consistently(func(g Gomega) {
		g.Expect(r.grant(g, "a")).To(HaveLen(4))
		g.Expect(r.grant(g, "b")).To(BeEmpty())
	}, "300ms").Should(Succeed())

	// a's agent gives an empty block back: it is a's no longer, b gets it.
	r.claim(t, "a", 5, 0, "10.64.0.0/26")
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal(
		[]string{"10.64.0.64/26", "10.64.0.128/26", "10.64.0.192/26"}))
	g.Eventually(func(g Gomega) []string { return r.grant(g, "b") }).Should(Equal([]string{"10.64.0.0/26"}))

	// a's agent goes: the rest stays fenced for the grace period.
	agentDown(t, r.db, "a")
	var due time.Time
	g.Eventually(func(g Gomega) {
		f := fenceOf(s.Status().Fenced, "a")
		g.Expect(f).NotTo(BeNil())
		g.Expect(f.Due).NotTo(BeNil())
		due = *f.Due
	}).Should(Succeed())
	g.Expect(due).To(Equal(clk.Now().Add(fenceGrace)), "due one grace period after the key went")
	g.Expect(r.grant(g, "b")).To(HaveLen(1))
	clk.Step(fenceGrace)
	g.Eventually(func(g Gomega) {
		g.Expect(r.exists(g, grantKey("a"))).To(BeFalse())
		g.Expect(r.exists(g, claimKey("a"))).To(BeFalse())
		g.Expect(r.grant(g, "b")).To(Equal([]string{"10.64.0.0/26", "10.64.0.64/26"}))
	}).Should(Succeed())
	g.Expect(s.Status().Fenced).To(BeEmpty())
	g.Expect(testutil.ToFloat64(s.metrics.fenced.WithLabelValues("ipv4"))).To(BeZero())
	r.hist.check(t)
}

// A Node deleted and created again while its agent runs: the fence ends,
// the node keeps its blocks and is served again (it gets more).
func TestPoolBlocksANodeThatComesBackWithItsAgentKeepsItsBlocks(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a")
	clk := newFakeClock()
	r.clock, r.grace = clk, fenceGrace
	agentUp(t, r.db, "a")
	s := r.start(t, poolConfig(poolV4), nil)
	r.claim(t, "a", 2, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal([]string{"10.64.0.0/26", "10.64.0.64/26"}))

	r.deleteNode(t, "a")
	g.Eventually(func() []FencedNode { return s.Status().Fenced }).Should(HaveLen(1))
	r.createNode(t, "a")
	g.Eventually(func() []FencedNode { return s.Status().Fenced }).Should(BeEmpty())
	r.claim(t, "a", 3, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(Equal(
		[]string{"10.64.0.0/26", "10.64.0.64/26", "10.64.0.128/26"}))
	r.hist.check(t)
}

// The fence shows in the status as JSON: node, blocks, since when, and
// when it is due once the agent went.
func TestPoolBlocksFencedNodesInTheStatus(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a")
	clk := newFakeClock()
	r.clock, r.grace = clk, fenceGrace
	s := r.start(t, poolConfig(poolV4), nil)
	agentUp(t, r.db, "a")
	r.claim(t, "a", 1, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(HaveLen(1))
	r.deleteNode(t, "a")
	g.Eventually(func() []FencedNode { return s.Status().Fenced }).Should(HaveLen(1))
	agentDown(t, r.db, "a")
	g.Eventually(func() *time.Time { return s.Status().Fenced[0].Due }).ShouldNot(BeNil())
	out, err := json.Marshal(s.Status().Fenced)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(MatchJSON(`[{"node":"a","blocks":["10.64.0.0/26"],"goneSince":"2026-01-01T00:00:00Z",` +
		`"agentGoneSince":"2026-01-01T00:00:00Z","due":"2026-01-01T00:00:30Z"}]`))
}

// A fenced node whose agent gives every block back holds nothing to
// fence: its grant and claim go although its agent runs, and the blocks
// are free.
func TestPoolBlocksAFencedNodeThatGivesEverythingBackGoes(t *testing.T) {
	g := NewWithT(t)
	r := newPoolRig(t, "a")
	clk := newFakeClock()
	r.clock, r.grace = clk, fenceGrace
	agentUp(t, r.db, "a")
	s := r.start(t, poolConfig(poolV4), nil)
	r.claim(t, "a", 2, 0)
	g.Eventually(func(g Gomega) []string { return r.grant(g, "a") }).Should(HaveLen(2))
	r.deleteNode(t, "a")
	g.Eventually(func() []FencedNode { return s.Status().Fenced }).Should(HaveLen(1))

	r.claim(t, "a", 2, 0, "10.64.0.0/26", "10.64.0.64/26")
	g.Eventually(func(g Gomega) {
		g.Expect(r.exists(g, grantKey("a"))).To(BeFalse())
		g.Expect(r.exists(g, claimKey("a"))).To(BeFalse())
	}).Should(Succeed())
	g.Expect(s.Status().Fenced).To(BeEmpty())
	g.Expect(s.Status().Ranges[0].Used).To(BeZero())
	r.hist.check(t)
}
