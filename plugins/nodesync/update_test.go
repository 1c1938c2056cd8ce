package nodesync_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/controllertest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// updater is a plugin for node-x (ID 3 after the resync of clusterState)
// and the loop that records the follow-ups it pushes.
type updater struct {
	t    *testing.T
	p    *nodesync.Plugin
	loop *loop
	// last values by key, for PrevValue
	values map[string]proto.Message
}

func newUpdater(t *testing.T, opts ...nodesync.Option) *updater {
	t.Helper()
	db := newDB(t, etcdtest.Start(t))
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a"})
	putRecord(t, db, &vppnode.VppNode{Id: 2, Name: "node-b"})
	u := &updater{t: t, loop: &loop{}, values: map[string]proto.Message{}}
	u.p = newPlugin(t, "node-x", db, u.loop, opts...)
	ks := clusterState()
	ks["node"][node.Key("node-x")] = &node.Node{Name: "node-x", Pod_CIDR: "10.1.4.0/24"}
	for _, data := range ks {
		for k, v := range data {
			u.values[k] = v
		}
	}
	if err := resync(u.p, ks); err != nil {
		t.Fatal(err)
	}
	if id := u.p.GetNodeID(); id != 3 {
		t.Fatalf("node ID %d, want 3", id)
	}
	return u
}

// change applies a put (v != nil) or delete of key, as the controller
// would: only when HandlesEvent. It returns the change description.
func (u *updater) change(resource, key string, v proto.Message) string {
	u.t.Helper()
	ev := &api.KubeStateChange{Resource: resource, Key: key, PrevValue: u.values[key], NewValue: v}
	if v == nil {
		delete(u.values, key)
	} else {
		u.values[key] = v
	}
	if !u.p.HandlesEvent(ev) {
		return "<not handled>"
	}
	desc, err := u.p.Update(ev, u.txn())
	if err != nil {
		u.t.Fatalf("Update %s: %v", ev, err)
	}
	return desc
}

// txn is a transaction whose follow-ups go to u.loop.
func (u *updater) txn() *controllertest.Txn {
	return &controllertest.Txn{OnFollowUp: u.loop.PushEvent}
}

func (u *updater) putVpp(rec *vppnode.VppNode) string {
	return u.change("vppnode", vppnode.Key(rec.Id), rec)
}

func (u *updater) putNode(n *node.Node) string { return u.change("node", node.Key(n.Name), n) }

func TestOtherNodeJoinsChangesAndLeaves(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)

	// join
	desc := u.putVpp(&vppnode.VppNode{Id: 4, Name: "node-d", IpAddresses: []string{"192.168.16.4/24"}})
	g.Expect(desc).To(Equal("node node-d joined (ID 4, VPP IPs [192.168.16.4/24])"))
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].NodeName).To(Equal("node-d"))
	g.Expect(ups[0].PrevState).To(BeNil())
	g.Expect(ups[0].NewState.ID).To(Equal(uint32(4)))
	g.Expect(vppStrings(ups[0].NewState)).To(Equal([]string{"192.168.16.4/24"}))
	g.Expect(u.p.GetAllNodes()).To(HaveKey("node-d"))

	// the same record again: nothing changed
	g.Expect(u.putVpp(&vppnode.VppNode{Id: 4, Name: "node-d", IpAddresses: []string{"192.168.16.4/24"}})).To(BeEmpty())
	g.Expect(u.loop.take()).To(BeEmpty())

	// address change
	desc = u.putVpp(&vppnode.VppNode{Id: 4, Name: "node-d", IpAddresses: []string{"192.168.16.4/24", "fd00::4/64"}})
	g.Expect(desc).To(Equal("node node-d VPP IPs [192.168.16.4/24] -> [192.168.16.4/24 fd00::4/64]"))
	ups = u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(vppStrings(ups[0].PrevState)).To(Equal([]string{"192.168.16.4/24"}))
	g.Expect(vppStrings(ups[0].NewState)).To(Equal([]string{"192.168.16.4/24", "fd00::4/64"}))

	// leave
	desc = u.change("vppnode", vppnode.Key(4), nil)
	g.Expect(desc).To(Equal("node node-d left (ID 4)"))
	ups = u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].NodeName).To(Equal("node-d"))
	g.Expect(ups[0].PrevState.ID).To(Equal(uint32(4)))
	g.Expect(ups[0].NewState).To(BeNil())
	g.Expect(u.p.GetAllNodes()).NotTo(HaveKey("node-d"))
}

func TestANodeKnownFromKubernetesJoinsWithItsAddresses(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	// node-c is a Kubernetes node without an ID: a change makes no event.
	desc := u.putNode(&node.Node{Name: "node-c", Pod_CIDR: "10.1.3.0/24", Addresses: []*node.NodeAddress{
		addr(node.NodeAddress_NodeInternalIP, "10.0.0.3"),
	}})
	g.Expect(desc).To(ContainSubstring("no node ID yet"))
	g.Expect(u.loop.take()).To(BeEmpty())

	u.putVpp(&vppnode.VppNode{Id: 7, Name: "node-c"})
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].PrevState).To(BeNil(), "a node without an ID had not joined")
	g.Expect(ups[0].NewState.ID).To(Equal(uint32(7)))
	g.Expect(ipStrings(ups[0].NewState.MgmtIPAddresses)).To(Equal([]string{"10.0.0.3"}))
	g.Expect(ups[0].NewState.PodCIDR.String()).To(Equal("10.1.3.0/24"))
}

func TestKubernetesNodeAddressChange(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	desc := u.putNode(&node.Node{Name: "node-b", Pod_CIDR: "bogus", Addresses: []*node.NodeAddress{
		addr(node.NodeAddress_NodeInternalIP, "10.0.0.2"),
		addr(node.NodeAddress_NodeExternalIP, "203.0.113.2"),
	}})
	g.Expect(desc).To(Equal("node node-b management IPs [10.0.0.2] -> [10.0.0.2 203.0.113.2]"))
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].NodeName).To(Equal("node-b"))
	g.Expect(ipStrings(ups[0].PrevState.MgmtIPAddresses)).To(Equal([]string{"10.0.0.2"}))
	g.Expect(ipStrings(ups[0].NewState.MgmtIPAddresses)).To(Equal([]string{"10.0.0.2", "203.0.113.2"}))
	g.Expect(ups[0].NewState.ID).To(Equal(uint32(2)))
	g.Expect(vppStrings(ups[0].NewState)).To(Equal([]string{"192.168.16.2/24"}))
}

// The original emitted NodeUpdate for Kubernetes node changes only when the
// management addresses changed: a pod-CIDR-only change never reached IPAM.
func TestKubernetesNodePodCIDROnlyChange(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	a := proto.Clone(u.values[node.Key("node-a")]).(*node.Node)
	a.Pod_CIDR = "10.1.11.0/24"
	desc := u.putNode(a)
	g.Expect(desc).To(Equal("node node-a pod CIDR 10.1.1.0/24 -> 10.1.11.0/24"))
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1), "a pod CIDR change alone yields a NodeUpdate")
	g.Expect(ups[0].NodeName).To(Equal("node-a"))
	g.Expect(ups[0].PrevState.PodCIDR).To(Equal(ipNet(t, "10.1.1.0/24")))
	g.Expect(ups[0].NewState.PodCIDR).To(Equal(ipNet(t, "10.1.11.0/24")))
	g.Expect(ups[0].NewState.MgmtIPAddresses).To(Equal(ups[0].PrevState.MgmtIPAddresses))

	// unset and unparsable count as no pod CIDR
	a = proto.Clone(a).(*node.Node)
	a.Pod_CIDR = ""
	u.putNode(a)
	ups = u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].NewState.PodCIDR).To(BeNil())
	a = proto.Clone(a).(*node.Node)
	a.Pod_CIDR = "10.1.11.0/99"
	g.Expect(u.putNode(a)).To(BeEmpty(), "still no valid pod CIDR")
	g.Expect(u.loop.take()).To(BeEmpty())
}

func TestThisNodesPodCIDRChange(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	desc := u.putNode(&node.Node{Name: "node-x", Pod_CIDR: "10.1.40.0/24"})
	g.Expect(desc).To(Equal("node node-x pod CIDR 10.1.4.0/24 -> 10.1.40.0/24"))
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].NodeName).To(Equal("node-x"))
	g.Expect(ups[0].PrevState.ID).To(Equal(uint32(3)))
	g.Expect(ups[0].PrevState.PodCIDR.String()).To(Equal("10.1.4.0/24"))
	g.Expect(ups[0].NewState.PodCIDR.String()).To(Equal("10.1.40.0/24"))
}

func TestNoEventWithoutARelevantChange(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	a := proto.Clone(u.values[node.Key("node-a")]).(*node.Node)
	a.Provider_ID = "aws:///i-123"
	a.Addresses = append(a.Addresses, addr(node.NodeAddress_NodeHostName, "renamed"))
	// same addresses in another order
	a.Addresses[1], a.Addresses[2] = a.Addresses[2], a.Addresses[1]
	g.Expect(u.putNode(a)).To(BeEmpty())
	g.Expect(u.loop.take()).To(BeEmpty())

	// this node's own record: not handled
	g.Expect(u.putVpp(&vppnode.VppNode{Id: 3, Name: "node-x", IpAddresses: []string{"192.168.16.3/24"}})).
		To(Equal("<not handled>"))
	g.Expect(u.loop.take()).To(BeEmpty())

	// values of another type and invalid keys are logged, not errors
	g.Expect(u.change("vppnode", vppnode.Key(5), &structpb.Struct{})).To(BeEmpty())
	g.Expect(u.change("vppnode", "allocatedIDs/x", &vppnode.VppNode{Id: 5, Name: "node-e"})).To(BeEmpty())
	g.Expect(u.change("vppnode", vppnode.Key(5), &vppnode.VppNode{Id: 5})).To(BeEmpty(), "no name")
	g.Expect(u.change("node", node.Key("node-a"), &structpb.Struct{})).To(BeEmpty())
	g.Expect(u.change("node", "k8s/node/", &node.Node{Name: "x"})).To(BeEmpty())
	g.Expect(u.loop.take()).To(BeEmpty())
	g.Expect(u.p.GetAllNodes()).To(HaveLen(3))

	// a deleted Kubernetes node that was known from nothing else
	g.Expect(u.change("node", node.Key("node-c"), nil)).To(ContainSubstring("no node ID yet"))
	g.Expect(u.change("node", node.Key("node-unknown"), nil)).To(BeEmpty())
	g.Expect(u.loop.take()).To(BeEmpty())
}

func TestDeletedKubernetesNodeOfANodeWithAnID(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	g.Expect(u.change("node", node.Key("node-a"), nil)).To(Equal(
		"node node-a management IPs [10.0.0.1 203.0.113.1 2001:db8::1] -> [], pod CIDR 10.1.1.0/24 -> <nil>"))
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].NewState.ID).To(Equal(uint32(1)), "the node keeps its ID")
	g.Expect(ups[0].NewState.MgmtIPAddresses).To(BeEmpty())
	g.Expect(ups[0].NewState.PodCIDR).To(BeNil())
}

func TestARecordThatNamesAnotherNode(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	desc := u.putVpp(&vppnode.VppNode{Id: 2, Name: "node-e"})
	g.Expect(desc).To(Equal("node node-b left (ID 2); node node-e joined (ID 2, VPP IPs [])"))
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(2))
	g.Expect(ups[0].NodeName).To(Equal("node-b"))
	g.Expect(ups[0].NewState).To(BeNil())
	g.Expect(ups[1].NodeName).To(Equal("node-e"))
	g.Expect(ups[1].PrevState).To(BeNil())

	// A second, larger ID of node-a is ignored; a smaller one wins.
	g.Expect(u.putVpp(&vppnode.VppNode{Id: 9, Name: "node-a"})).To(BeEmpty())
	g.Expect(u.loop.take()).To(BeEmpty())
}

func TestNodeUpdateStatesAreCopies(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	before := u.p.GetAllNodes()
	u.putNode(&node.Node{Name: "node-a", Pod_CIDR: "10.1.21.0/24", Addresses: []*node.NodeAddress{
		addr(node.NodeAddress_NodeInternalIP, "10.0.0.21"),
	}})
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	after := u.p.GetAllNodes()
	for _, n := range []*nodesync.Node{ups[0].PrevState, ups[0].NewState} {
		n.ID = 77
		n.VppIPAddresses[0].Address[0] = 7
		n.MgmtIPAddresses[0][0] = 7
		n.PodCIDR.IP[0] = 7
		n.PodCIDRs[0].IP[0] = 7
	}
	g.Expect(u.p.GetAllNodes()).To(Equal(after))
	g.Expect(before["node-a"].PodCIDR.String()).To(Equal("10.1.1.0/24"))
	g.Expect(after["node-a"].PodCIDRs[0].String()).To(Equal("10.1.21.0/24"))
}

func TestUpdateReturnsPushErrors(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	u.loop.err = api.ErrEventQueueFull
	ev := &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(6), NewValue: &vppnode.VppNode{Id: 6, Name: "node-f"}}
	desc, err := u.p.Update(ev, u.txn())
	g.Expect(desc).To(ContainSubstring("node-f joined"))
	g.Expect(err).To(MatchError(api.ErrEventQueueFull))
	g.Expect(err.Error()).To(ContainSubstring(`push Node Update for node "node-f"`))

	desc, err = u.p.Update(&nodesync.NodeUpdate{NodeName: "node-a"}, u.txn())
	g.Expect(desc).To(BeEmpty())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.p.Revert(ev)).To(Succeed())
}
