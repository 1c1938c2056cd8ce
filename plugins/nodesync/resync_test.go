package nodesync_test

import (
	"net"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

func ipNet(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func vppStrings(n *nodesync.Node) []string {
	out := make([]string, len(n.VppIPAddresses))
	for i, a := range n.VppIPAddresses {
		out[i] = a.String()
	}
	return out
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// clusterState is a kube state with three nodes:
//   - node-a: ID 1 (two VPP IPs), Kubernetes node with every address type;
//   - node-b: ID 2 (obsolete ip_address), Kubernetes node with a bad pod CIDR;
//   - node-c: Kubernetes node only (no ID).
func clusterState() api.KubeStateData {
	return api.KubeStateData{
		"vppnode": vppState(
			&vppnode.VppNode{Id: 1, Name: "node-a", IpAddresses: []string{"192.168.16.1/24", "fd00::1/64"}},
			&vppnode.VppNode{Id: 2, Name: "node-b", IpAddress: "192.168.16.2/24"},
		),
		"node": nodeState(
			&node.Node{Name: "node-a", Pod_CIDR: "10.1.1.0/24", Addresses: []*node.NodeAddress{
				addr(node.NodeAddress_NodeHostName, "node-a"),
				addr(node.NodeAddress_NodeInternalIP, "10.0.0.1"),
				addr(node.NodeAddress_NodeExternalIP, "203.0.113.1"),
				addr(node.NodeAddress_NodeInternalDNS, "node-a.cluster.local"),
				addr(node.NodeAddress_NodeExternalDNS, "node-a.example.com"),
				addr(node.NodeAddress_NodeUnknown, "10.9.9.9"),
				addr(node.NodeAddress_NodeInternalIP, "2001:db8::1"),
				addr(node.NodeAddress_NodeInternalIP, "not-an-ip"),
			}},
			&node.Node{Name: "node-b", Pod_CIDR: "bogus", Addresses: []*node.NodeAddress{
				addr(node.NodeAddress_NodeInternalIP, "10.0.0.2"),
			}},
			&node.Node{Name: "node-c", Pod_CIDR: "10.1.3.0/24"},
		),
	}
}

func TestResyncBuildsNodesFromKubeState(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a"})
	putRecord(t, db, &vppnode.VppNode{Id: 2, Name: "node-b"})
	ks := clusterState()
	// Invalid entries are skipped.
	ks["vppnode"]["allocatedIDs/zero"] = &vppnode.VppNode{Id: 9, Name: "bad-key"}
	ks["vppnode"][vppnode.Key(8)] = &structpb.Struct{}
	ks["vppnode"][vppnode.Key(7)] = &vppnode.VppNode{Id: 7}
	ks["node"]["k8s/node/"] = &node.Node{Name: "empty"}
	ks["node"][node.Key("node-z")] = &structpb.Struct{}
	ks["node"][node.Key("node-x")] = &node.Node{Name: "node-x", Pod_CIDR: "10.1.4.0/24"}

	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, ks)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(3)))

	nodes := p.GetAllNodes()
	g.Expect(nodes).To(HaveLen(3), "node-c has no ID")
	g.Expect(nodes).To(HaveKey("node-a"))
	g.Expect(nodes).To(HaveKey("node-b"))
	g.Expect(nodes).To(HaveKey("node-x"))

	a := nodes["node-a"]
	g.Expect(a.ID).To(Equal(uint32(1)))
	g.Expect(a.Name).To(Equal("node-a"))
	g.Expect(vppStrings(a)).To(Equal([]string{"192.168.16.1/24", "fd00::1/64"}))
	g.Expect(a.VppIPAddresses[0].Address).To(HaveLen(net.IPv4len), "IPv4 in 4-byte form")
	g.Expect(a.VppIPAddresses[0].Network.String()).To(Equal("192.168.16.0/24"))
	g.Expect(ipStrings(a.MgmtIPAddresses)).To(Equal([]string{"10.0.0.1", "203.0.113.1", "2001:db8::1"}))
	g.Expect(a.PodCIDR).To(Equal(ipNet(t, "10.1.1.0/24")))

	b := nodes["node-b"]
	g.Expect(b.ID).To(Equal(uint32(2)))
	g.Expect(vppStrings(b)).To(Equal([]string{"192.168.16.2/24"}), "obsolete ip_address read")
	g.Expect(ipStrings(b.MgmtIPAddresses)).To(Equal([]string{"10.0.0.2"}))
	g.Expect(b.PodCIDR).To(BeNil(), "unparsable pod CIDR left nil")

	x := nodes["node-x"]
	g.Expect(x.ID).To(Equal(uint32(3)))
	g.Expect(x.PodCIDR.String()).To(Equal("10.1.4.0/24"))
}

func TestThisNodeIsCreatedWhenTheKubeStateLacksIt(t *testing.T) {
	g := NewWithT(t)
	p := newPlugin(t, "node-x", newDB(t, etcdtest.Start(t)), &loop{})
	g.Expect(resync(p, clusterState())).To(Succeed())
	g.Expect(p.GetAllNodes()).To(HaveKeyWithValue("node-x", &nodesync.Node{ID: 1, Name: "node-x"}))
}

func TestGetAllNodesReturnsCopies(t *testing.T) {
	g := NewWithT(t)
	p := newPlugin(t, "node-x", newDB(t, etcdtest.Start(t)), &loop{})
	g.Expect(resync(p, clusterState())).To(Succeed())
	before := p.GetAllNodes()

	got := p.GetAllNodes()
	a := got["node-a"]
	a.ID = 99
	a.Name = "changed"
	a.VppIPAddresses[0].Address[0] = 1
	a.VppIPAddresses[0].Network.Mask[0] = 0
	a.VppIPAddresses = append(a.VppIPAddresses, a.VppIPAddresses[0])
	a.MgmtIPAddresses[0][0] = 1
	a.PodCIDR.IP[0] = 1
	delete(got, "node-b")
	got["node-c"] = &nodesync.Node{ID: 5}

	g.Expect(p.GetAllNodes()).To(Equal(before))
}

func TestLaterResyncsKeepTheClaimedID(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(1)))

	// A later resync whose (stale) kube state gives this node another ID.
	ks := api.KubeStateData{"vppnode": vppState(&vppnode.VppNode{Id: 4, Name: "node-x"}, &vppnode.VppNode{Id: 2, Name: "node-a"})}
	g.Expect(p.Resync(&api.HealingResync{Type: api.AfterError}, ks, 2, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(1)))
	g.Expect(p.GetAllNodes()["node-x"].ID).To(Equal(uint32(1)))
	g.Expect(p.GetAllNodes()["node-a"].ID).To(Equal(uint32(2)))
	g.Expect(records(t, db)).To(HaveLen(1), "no second claim")
}

func TestSeveralRecordsOfOneNodeKeepTheSmallestID(t *testing.T) {
	g := NewWithT(t)
	p := newPlugin(t, "node-x", newDB(t, etcdtest.Start(t)), &loop{})
	ks := api.KubeStateData{"vppnode": vppState(
		&vppnode.VppNode{Id: 9, Name: "node-a"},
		&vppnode.VppNode{Id: 4, Name: "node-a"},
		&vppnode.VppNode{Id: 12, Name: "node-a"},
	)}
	g.Expect(resync(p, ks)).To(Succeed())
	g.Expect(p.GetAllNodes()["node-a"].ID).To(Equal(uint32(4)))
}

func TestHandlesEvent(t *testing.T) {
	p := newPlugin(t, "node-x", newDB(t, etcdtest.Start(t)), &loop{})
	NewWithT(t).Expect(resync(p, nil)).To(Succeed()) // ID 1
	own := &vppnode.VppNode{Id: 1, Name: "node-x"}
	for _, tc := range []struct {
		name string
		ev   api.Event
		want bool
	}{
		{"db resync", &api.DBResync{}, true},
		{"healing resync", &api.HealingResync{Type: api.AfterError}, true},
		{"periodic healing", &api.HealingResync{Type: api.Periodic}, true},
		{"k8s node", &api.KubeStateChange{Resource: "node", Key: node.Key("node-a"), NewValue: &node.Node{}}, true},
		{"this k8s node", &api.KubeStateChange{Resource: "node", Key: node.Key("node-x"), NewValue: &node.Node{}}, true},
		{"other vppnode", &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(2), NewValue: &vppnode.VppNode{Id: 2, Name: "node-a"}}, true},
		{"other vppnode deleted", &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(2), PrevValue: &vppnode.VppNode{Id: 2, Name: "node-a"}}, true},
		{"own vppnode key", &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(1), NewValue: own}, false},
		{"own vppnode key deleted: re-asserted", &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(1), PrevValue: own}, true},
		{"own vppnode key taken: re-asserted", &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(1), PrevValue: own,
			NewValue: &vppnode.VppNode{Id: 1, Name: "node-b"}}, true},
		{"node ID check", &nodesync.NodeIDCheck{Reason: "test"}, true},
		{"own name on another key", &api.KubeStateChange{Resource: "vppnode", Key: vppnode.Key(5), NewValue: &vppnode.VppNode{Id: 5, Name: "node-x"}}, false},
		{"pod", &api.KubeStateChange{Resource: "pod", Key: "k8s/pod/a/b"}, false},
		{"node update", &nodesync.NodeUpdate{NodeName: "node-a"}, false},
		{"shutdown", &api.Shutdown{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(p.HandlesEvent(tc.ev)).To(Equal(tc.want))
		})
	}
}

func TestResourceKeywordsAreTheControllers(t *testing.T) {
	NewWithT(t).Expect(dbresources.Keywords()).To(ContainElements(nodesync.Resources))
}

func TestInitNeedsALabel(t *testing.T) {
	g := NewWithT(t)
	g.Expect(nodesync.NewPlugin(nodesync.UseDeps(func(d *nodesync.Deps) { d.Cfg = config.NoFile })).Init()).
		To(MatchError(ContainSubstring("needs ServiceLabel")))
	g.Expect(nodesync.NewPlugin(nodesync.UseDeps(func(d *nodesync.Deps) { d.Cfg, d.ServiceLabel = config.NoFile, label("") })).Init()).
		To(MatchError(ContainSubstring("empty")))
	g.Expect(nodesync.DefaultPlugin().String()).To(Equal("nodesync"))
}
