package nodesync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// deleteRecord deletes a vppnode record behind the agents' backs.
func deleteRecord(t *testing.T, srv *etcdtest.Server, id uint32) {
	t.Helper()
	if _, err := srv.Client(t).Delete(t.Context(), codec.KSRPrefix+vppnode.Key(id)); err != nil {
		t.Fatal(err)
	}
}

// ownDeleted is the change the controller delivers when the record of id
// naming name is deleted.
func ownDeleted(id uint32, name string) *api.KubeStateChange {
	return &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(id), PrevValue: &vppnode.VppNode{Id: id, Name: name}}
}

// expectConflict checks a fatal error naming this node, the holder and the ID.
func expectConflict(g Gomega, err error, id uint32, me, holder string) {
	g.ExpectWithOffset(1, api.IsFatal(err)).To(BeTrue(), "fatal: %v", err)
	g.ExpectWithOffset(1, errors.Is(err, nodesync.ErrNodeIDConflict)).To(BeTrue(), "conflict: %v", err)
	g.ExpectWithOffset(1, err.Error()).To(ContainSubstring(
		`node ID %d of node %q is held by node %q (etcd key /vnf-agent/contiv-ksr/allocatedIDs/%d)`, id, me, holder, id))
}

// expectLost checks that p reports no ID of its own any more.
func expectLost(g Gomega, p *nodesync.Plugin, me string) {
	g.ExpectWithOffset(1, p.GetNodeID()).To(BeZero(), "the lost ID is never reported as this node's")
	g.ExpectWithOffset(1, p.GetAllNodes()).NotTo(HaveKey(me))
}

func TestDeletedOwnRecordIsRecreatedAtOnce(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	p := newPlugin(t, "node-a", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.16.1/24")}, nodesync.IPv4)).To(Succeed())

	deleteRecord(t, srv, 1)
	ev := ownDeleted(1, "node-a")
	g.Expect(p.HandlesEvent(ev)).To(BeTrue(), "the deletion of this node's own record is handled")
	desc, err := p.Update(ev, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(desc).To(Equal("own record allocatedIDs/1 deleted: re-asserted for node node-a"))
	rec := records(t, db)[1]
	g.Expect(rec.GetName()).To(Equal("node-a"))
	g.Expect(rec.GetId()).To(Equal(uint32(1)))
	g.Expect(rec.GetIpAddresses()).To(Equal([]string{"192.168.16.1/24"}), "re-created with the published addresses")

	// Another node claiming now gets the next ID, not this node's.
	b := newPlugin(t, "node-b", newDB(t, srv), &loop{})
	g.Expect(resync(b, nil)).To(Succeed())
	g.Expect(b.GetNodeID()).To(Equal(uint32(2)))
}

func TestOwnRecordTakenByAnotherNodeIsFatal(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	p := newPlugin(t, "node-a", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())

	taken := &vppnode.VppNode{Id: 1, Name: "node-b"}
	putRecord(t, db, taken)
	ev := &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(1), PrevValue: &vppnode.VppNode{Id: 1, Name: "node-a"}, NewValue: taken}
	g.Expect(p.HandlesEvent(ev)).To(BeTrue())
	_, err := p.Update(ev, nil)
	expectConflict(g, err, 1, "node-a", "node-b")
	expectLost(g, p, "node-a")
	g.Expect(records(t, db)[1].GetName()).To(Equal("node-b"), "the other node's record is left alone")

	// Every later resync fails the same way.
	err = p.Resync(&api.HealingResync{Type: api.AfterError}, api.KubeStateData{}, 2, nil)
	expectConflict(g, err, 1, "node-a", "node-b")
	g.Expect(p.GetNodeID()).To(BeZero())
}

// Issue 8 scenario on embedded etcd, without the controller: node-a runs
// on its mirror while etcd is away; meanwhile its record is deleted and
// node-b claims the freed ID. When etcd is back the remote resync finds
// the ID held by node-b: node-a goes fatal and stops reporting the ID.
func TestRemoteResyncAfterAGapFindsTheIDTaken(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv, shortTimeout)
	a := newPlugin(t, "node-a", db, &loop{})
	g.Expect(resync(a, nil)).To(Succeed())
	mirror := api.KubeStateData{"vppnode": vppState(&vppnode.VppNode{Id: 1, Name: "node-a"})}

	srv.Stop()
	g.Expect(a.Resync(local(mirror), mirror, 2, nil)).To(Succeed(), "a local resync needs no etcd")
	srv.Restart()
	deleteRecord(t, srv, 1)
	b := newPlugin(t, "node-b", newDB(t, srv), &loop{})
	g.Expect(resync(b, nil)).To(Succeed())
	g.Expect(b.GetNodeID()).To(Equal(uint32(1)), "node-b claims the freed ID")

	now := api.KubeStateData{"vppnode": vppState(&vppnode.VppNode{Id: 1, Name: "node-b"})}
	var err error
	g.Eventually(func() error {
		err = a.Resync(remote(now), now, 3, nil)
		return err
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(nodesync.ErrNodeIDConflict))
	expectConflict(g, err, 1, "node-a", "node-b")
	expectLost(g, a, "node-a")
	g.Expect(records(t, db)[1].GetName()).To(Equal("node-b"))
	g.Expect(b.GetNodeID()).To(Equal(uint32(1)))
}

// A record deleted during the gap and still free is re-created by the
// remote resync that follows a local one.
func TestRemoteResyncAfterALocalOneRecreatesTheRecord(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	a := newPlugin(t, "node-a", db, &loop{})
	g.Expect(resync(a, nil)).To(Succeed())
	mirror := api.KubeStateData{"vppnode": vppState(&vppnode.VppNode{Id: 1, Name: "node-a"})}
	g.Expect(a.Resync(local(mirror), mirror, 2, nil)).To(Succeed())
	deleteRecord(t, srv, 1)

	g.Expect(a.Resync(remote(api.KubeStateData{}), api.KubeStateData{}, 3, nil)).To(Succeed())
	g.Expect(records(t, db)).To(HaveKeyWithValue(uint32(1), HaveField("Name", "node-a")))
	g.Expect(a.GetNodeID()).To(Equal(uint32(1)))
}

// The same after a restart that found etcd down: the ID from the mirror is
// re-asserted by the first remote resync.
func TestIDFromTheMirrorIsReassertedWhenEtcdIsBack(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	mirror := api.KubeStateData{"vppnode": vppState(&vppnode.VppNode{Id: 4, Name: "node-a"})}
	a := newPlugin(t, "node-a", db, &loop{})
	g.Expect(a.Resync(local(mirror), mirror, 1, nil)).To(Succeed())
	g.Expect(a.GetNodeID()).To(Equal(uint32(4)))
	g.Expect(records(t, db)).To(BeEmpty(), "etcd lost the record")

	g.Expect(a.Resync(remote(api.KubeStateData{}), api.KubeStateData{}, 2, nil)).To(Succeed())
	g.Expect(records(t, db)).To(HaveKeyWithValue(uint32(4), HaveField("Name", "node-a")))
}

// A re-assert that cannot reach etcd is not fatal: it stays pending and the
// next resync that reaches etcd does it.
func TestReassertWithEtcdDownIsRetriedAtTheNextResync(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv, shortTimeout)
	a := newPlugin(t, "node-a", db, &loop{})
	g.Expect(resync(a, nil)).To(Succeed())
	deleteRecord(t, srv, 1)

	srv.Stop()
	_, err := a.Update(ownDeleted(1, "node-a"), nil)
	g.Expect(err).To(MatchError(ContainSubstring(`re-asserting node ID 1 of node "node-a"`)))
	g.Expect(api.IsFatal(err)).To(BeFalse(), "etcd unreachable is not a conflict")
	g.Expect(a.GetNodeID()).To(Equal(uint32(1)))
	// The controller answers a failed update with a healing resync; etcd
	// is still down: the resync succeeds, the re-assert stays pending.
	g.Expect(a.Resync(&api.HealingResync{Type: api.AfterError}, api.KubeStateData{}, 2, nil)).To(Succeed())

	srv.Restart()
	g.Eventually(func() error {
		return a.Resync(&api.HealingResync{Type: api.AfterError}, api.KubeStateData{}, 3, nil)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func() map[uint32]*vppnode.VppNode { return records(t, db) }, 10*time.Second, 100*time.Millisecond).
		Should(HaveKeyWithValue(uint32(1), HaveField("Name", "node-a")))
}

// Issue 8 scenario through the controller: node-a is cut off from etcd
// (a proxy), its record is deleted, node-b claims ID 1, etcd restarts, and
// node-a comes back: it goes fatal naming both nodes and the ID, and never
// reports ID 1 as its own again.
func TestAgentCutOffWhileItsIDIsTakenGoesFatal(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	px := startProxy(t, srv.Endpoint())
	a := startStack(t, px.Addr(), "node-a")
	g.Eventually(a.ns.GetNodeID, 10*time.Second).Should(Equal(uint32(1)))

	px.Cut()
	deleteRecord(t, srv, 1)
	b := newPlugin(t, "node-b", newDB(t, srv), &loop{})
	g.Expect(resync(b, nil)).To(Succeed())
	g.Expect(b.GetNodeID()).To(Equal(uint32(1)))
	srv.Stop()
	srv.Restart()
	g.Expect(a.ns.GetNodeID()).To(Equal(uint32(1)), "cut off, node-a does not know yet")
	px.Restore()

	g.Eventually(a.health.err, 20*time.Second, 50*time.Millisecond).Should(MatchError(nodesync.ErrNodeIDConflict))
	expectConflict(g, a.health.err(), 1, "node-a", "node-b")
	expectLost(g, a.ns, "node-a")
	g.Expect(records(t, newDB(t, srv))[1].GetName()).To(Equal("node-b"))
	g.Expect(a.ctrl.PushEvent(&nodesync.NodeIDCheck{Reason: "test"})).To(MatchError(api.ErrClosedController),
		"the event loop stopped: the agent serves nothing more")
}

// Deleting the record of a connected agent in etcd: the agent puts it back
// at once, before another node can take the ID.
func TestConnectedAgentPutsItsDeletedRecordBack(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	a := startStack(t, srv.Endpoint(), "node-a")
	g.Eventually(a.ns.GetNodeID, 10*time.Second).Should(Equal(uint32(1)))
	db := newDB(t, srv)
	rev := revision(t, db, 1)

	deleteRecord(t, srv, 1)
	g.Eventually(func() int64 {
		kv, found, err := db.NewBroker(codec.KSRPrefix).Get(context.Background(), vppnode.Key(1))
		if err != nil || !found {
			return 0
		}
		return kv.Revision
	}, 10*time.Second, 20*time.Millisecond).Should(BeNumerically(">", rev))
	g.Expect(records(t, db)[1].GetName()).To(Equal("node-a"))
	g.Expect(a.health.err()).NotTo(HaveOccurred())
}
