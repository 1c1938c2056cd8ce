package nodesync_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// PublishNodeIPs never overwrites another node's record: the ID is lost,
// the error is fatal and names both nodes, and the loop is asked to check.
func TestPublishNeverOverwritesAnotherNodesRecord(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	l := &loop{}
	p := newPlugin(t, "node-a", db, l)
	g.Expect(resync(p, nil)).To(Succeed())
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-b", IpAddresses: []string{"192.168.16.9/24"}})

	err := p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.16.1/24")}, nodesync.IPv4)
	expectConflict(g, err, 1, "node-a", "node-b")
	g.Expect(err.Error()).To(HavePrefix(`cannot publish the VPP addresses of node "node-a": fatal error: node ID conflict`))
	rec := records(t, db)[1]
	g.Expect(rec.GetName()).To(Equal("node-b"))
	g.Expect(rec.GetIpAddresses()).To(Equal([]string{"192.168.16.9/24"}), "the other node's record is untouched")
	expectLost(g, p, "node-a")
	g.Expect(l.checks()).To(ConsistOf(HaveField("Reason", "PublishNodeIPs found node ID 1 held by another node")))

	_, err = p.Update(l.checks()[0], nil)
	expectConflict(g, err, 1, "node-a", "node-b")
	err = p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.16.1/24")}, nodesync.IPv4)
	expectConflict(g, err, 1, "node-a", "node-b")
}

// A record deleted behind the agent's back is created again by the next
// publication; one that names this node is swapped on its revision.
func TestPublishRecreatesADeletedRecord(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	p := newPlugin(t, "node-a", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	deleteRecord(t, srv, 1)
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.16.1/24")}, nodesync.IPv4)).To(Succeed())
	g.Expect(records(t, db)[1].GetIpAddresses()).To(Equal([]string{"192.168.16.1/24"}))
	g.Expect(records(t, db)[1].GetName()).To(Equal("node-a"))

	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a", IpAddresses: []string{"10.9.9.9/24"}}) // stale, still ours
	g.Expect(p.PublishNodeIPs([]*nodesync.IPWithNetwork{ipn(t, "192.168.16.2/24")}, nodesync.IPv4)).To(Succeed())
	g.Expect(records(t, db)[1].GetIpAddresses()).To(Equal([]string{"192.168.16.2/24"}))
	g.Expect(p.GetNodeID()).To(Equal(uint32(1)))
}
