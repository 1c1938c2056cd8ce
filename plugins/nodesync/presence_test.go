package nodesync_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// presenceOf reads the presence key of node: its holder and its lease.
func presenceOf(t *testing.T, cli *clientv3.Client, node string) (nodesync.Holder, clientv3.LeaseID, bool) {
	t.Helper()
	resp, err := cli.Get(t.Context(), nodesync.PresencePrefix+node)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nodesync.Holder{}, 0, false
	}
	var h nodesync.Holder
	if err := json.Unmarshal(resp.Kvs[0].Value, &h); err != nil {
		t.Fatalf("presence of %s: %v", node, err)
	}
	return h, clientv3.LeaseID(resp.Kvs[0].Lease), true
}

// expectTaken checks a fatal error naming the node name and the holder.
func expectTaken(g Gomega, err error, node string, holder nodesync.Holder) {
	g.ExpectWithOffset(1, api.IsFatal(err)).To(BeTrue(), "fatal: %v", err)
	g.ExpectWithOffset(1, errors.Is(err, nodesync.ErrNodeNameTaken)).To(BeTrue(), "name taken: %v", err)
	g.ExpectWithOffset(1, err.Error()).To(And(
		ContainSubstring(`node name %q is served by another live agent`, node),
		ContainSubstring(`"host":%q`, holder.Host),
		ContainSubstring(`"pid":%d`, holder.PID),
		ContainSubstring(`"started":%q`, holder.Started)))
}

func TestPresenceNamesThisProcess(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	p := newPlugin(t, "node-x", newDB(t, srv), &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	h, lease, found := presenceOf(t, srv.Client(t), "node-x")
	g.Expect(found).To(BeTrue())
	host, _ := os.Hostname()
	g.Expect(h.Node).To(Equal("node-x"))
	g.Expect(h.Host).To(Equal(host))
	g.Expect(h.PID).To(Equal(os.Getpid()))
	g.Expect(time.Parse(time.RFC3339Nano, h.Started)).NotTo(BeZero())
	ttl, err := srv.Client(t).TimeToLive(t.Context(), lease)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ttl.GrantedTTL).To(BeEquivalentTo(15), "default TTL")

	g.Expect(p.Close()).To(Succeed())
	_, _, found = presenceOf(t, srv.Client(t), "node-x")
	g.Expect(found).To(BeFalse(), "a clean stop releases the name at once")
}

// Two live agents started with the same node name: the second one refuses
// (after waiting one TTL for the first one's presence to go away, which it
// does not) and never takes an ID.
func TestSecondLiveAgentWithTheSameNameIsRefused(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	first := newPlugin(t, "node-x", newDB(t, srv), &loop{}, withTTL(time.Second))
	g.Expect(resync(first, nil)).To(Succeed())
	g.Expect(first.GetNodeID()).To(Equal(uint32(1)))
	holder, _, _ := presenceOf(t, srv.Client(t), "node-x")

	second := newPlugin(t, "node-x", newDB(t, srv), &loop{}, withTTL(time.Second))
	err := resync(second, nil)
	expectTaken(g, err, "node-x", holder)
	expectLost(g, second, "node-x")
	attempts, _, listings := second.ClaimStats()
	g.Expect(attempts+listings).To(BeZero(), "the claim never started")
	g.Expect(first.GetNodeID()).To(Equal(uint32(1)), "the first agent is untouched")
	still, _, _ := presenceOf(t, srv.Client(t), "node-x")
	g.Expect(still).To(Equal(holder))
}

// A killed agent (no Close: its etcd client just stops) leaves its
// presence behind; the restarted agent waits for it to expire and keeps
// the node's ID.
func TestRestartAfterKillWaitsForTheStalePresence(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	killedDB := newDB(t, srv)
	killed := newPlugin(t, "node-x", killedDB, &loop{}, withTTL(time.Second))
	g.Expect(resync(killed, nil)).To(Succeed())
	stale, _, _ := presenceOf(t, srv.Client(t), "node-x")
	g.Expect(killedDB.Close()).To(Succeed(), "SIGKILL: keep-alives stop, nothing is revoked")
	_, _, found := presenceOf(t, srv.Client(t), "node-x")
	g.Expect(found).To(BeTrue(), "the dead agent's presence is still there")

	restarted := newPlugin(t, "node-x", newDB(t, srv), &loop{}, withTTL(time.Second))
	g.Expect(resync(restarted, nil)).To(Succeed())
	g.Expect(restarted.GetNodeID()).To(Equal(uint32(1)))
	now, _, found := presenceOf(t, srv.Client(t), "node-x")
	g.Expect(found).To(BeTrue())
	g.Expect(now).NotTo(Equal(stale))
	g.Expect(now.Started).NotTo(Equal(stale.Started))
}

// The keeper notices a lost presence lease and asks the loop to check; the
// check claims the presence again.
func TestLostPresenceIsClaimedAgain(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	l := &loop{}
	p := newPlugin(t, "node-x", newDB(t, srv), l, withTTL(3*time.Second)) // a keep-alive every second
	g.Expect(p.AfterInit()).To(Succeed())
	g.Expect(resync(p, nil)).To(Succeed())
	raw := srv.Client(t)
	_, lease, _ := presenceOf(t, raw, "node-x")
	_, err := raw.Revoke(t.Context(), lease)
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(l.checks, 10*time.Second, 20*time.Millisecond).Should(ContainElement(
		HaveField("Reason", "presence lease lost")))
	desc, err := p.Update(l.checks()[0], nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).To(Equal("node node-x holds node ID 1 and its node name"))
	_, again, found := presenceOf(t, raw, "node-x")
	g.Expect(found).To(BeTrue())
	g.Expect(again).NotTo(Equal(lease))
}

// The presence lease expires while the agent is cut off from etcd and
// another agent with the same name takes the name: when etcd is back, the
// first agent finds the name served and goes fatal.
func TestPresenceTakenDuringAGapIsFatal(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	px := startProxy(t, srv.Endpoint())
	first := newPlugin(t, "node-x", newDBAt(t, px.Addr()), &loop{}, withTTL(time.Second))
	g.Expect(resync(first, nil)).To(Succeed())

	px.Cut()
	g.Eventually(func() bool {
		_, _, found := presenceOf(t, srv.Client(t), "node-x")
		return found
	}, 10*time.Second, 50*time.Millisecond).Should(BeFalse(), "the lease expires without keep-alives")
	second := newPlugin(t, "node-x", newDB(t, srv), &loop{}, withTTL(time.Second))
	g.Expect(resync(second, nil)).To(Succeed())
	holder, _, _ := presenceOf(t, srv.Client(t), "node-x")
	px.Restore()

	var err error
	g.Eventually(func() error {
		err = first.Resync(remote(api.KubeStateData{}), api.KubeStateData{}, 2, nil)
		return err
	}, 20*time.Second, 100*time.Millisecond).Should(MatchError(nodesync.ErrNodeNameTaken))
	expectTaken(g, err, "node-x", holder)
	expectLost(g, first, "node-x")
	g.Expect(second.GetNodeID()).To(Equal(uint32(1)))
}

// Someone else's value in the presence key while this agent runs (its lease
// revoked): the keeper's check finds the name served and goes fatal.
func TestPresenceTakenWhileRunningIsFatal(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	l := &loop{}
	p := newPlugin(t, "node-x", newDB(t, srv), l, withTTL(3*time.Second))
	g.Expect(p.AfterInit()).To(Succeed())
	g.Expect(resync(p, nil)).To(Succeed())
	raw := srv.Client(t)
	_, lease, _ := presenceOf(t, raw, "node-x")
	intruder := nodesync.Holder{Node: "node-x", Host: "elsewhere", PID: 7, Started: "2026-01-01T00:00:00Z"}
	value, _ := json.Marshal(intruder)
	_, err := raw.Put(t.Context(), nodesync.PresencePrefix+"node-x", string(value)) // no lease: never expires
	g.Expect(err).NotTo(HaveOccurred())
	_, err = raw.Revoke(t.Context(), lease)
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(l.checks, 10*time.Second, 20*time.Millisecond).ShouldNot(BeEmpty())
	_, err = p.Update(l.checks()[0], nil)
	expectTaken(g, err, "node-x", intruder)
	expectLost(g, p, "node-x")
}
