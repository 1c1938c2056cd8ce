package nodesync_test

import (
	"log/slog"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/logging/logtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// logBuffer collects a plugin's log lines; safe for concurrent use.
type logBuffer = logtest.Buffer

// withLogTo sends the plugin's logs to b.
func withLogTo(b *logBuffer) nodesync.Option {
	return nodesync.UseDeps(func(d *nodesync.Deps) {
		d.Log = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
}

func netStrings(list []*net.IPNet) []string {
	out := make([]string, len(list))
	for i, n := range list {
		out[i] = n.String()
	}
	return out
}

// withPodCIDRs is a copy of u's node name with pod_CIDR and pod_CIDRs set.
func (u *updater) withPodCIDRs(name, podCIDR string, podCIDRs ...string) *node.Node {
	n := proto.Clone(u.values[node.Key(name)]).(*node.Node)
	n.Pod_CIDR, n.Pod_CIDRs = podCIDR, podCIDRs
	return n
}

// A change of the second family's pod CIDR alone is a NodeUpdate, for
// another node and for this one.
func TestSecondFamilyPodCIDRChange(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)

	desc := u.putNode(u.withPodCIDRs("node-a", "10.1.1.0/24", "10.1.1.0/24", "fd00:10:1:1::/64"))
	g.Expect(desc).To(Equal("node node-a pod CIDRs [10.1.1.0/24] -> [10.1.1.0/24 fd00:10:1:1::/64]"))
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1), "the node became dual-stack")
	g.Expect(netStrings(ups[0].PrevState.PodCIDRs)).To(Equal([]string{"10.1.1.0/24"}))
	g.Expect(netStrings(ups[0].NewState.PodCIDRs)).To(Equal([]string{"10.1.1.0/24", "fd00:10:1:1::/64"}))

	desc = u.putNode(u.withPodCIDRs("node-a", "10.1.1.0/24", "10.1.1.0/24", "fd00:10:1:2::/64"))
	g.Expect(desc).To(Equal("node node-a pod CIDRs [10.1.1.0/24 fd00:10:1:1::/64] -> [10.1.1.0/24 fd00:10:1:2::/64]"))
	ups = u.loop.take()
	g.Expect(ups).To(HaveLen(1), "only the second family's CIDR moved")
	g.Expect(ups[0].NodeName).To(Equal("node-a"))
	g.Expect(ups[0].PrevState.PodCIDR).To(Equal(ups[0].NewState.PodCIDR))
	g.Expect(ups[0].PrevState.PodCIDRs[1]).To(Equal(ipNet(t, "fd00:10:1:1::/64")))
	g.Expect(ups[0].NewState.PodCIDRs[1]).To(Equal(ipNet(t, "fd00:10:1:2::/64")))
	g.Expect(ups[0].NewState.PodCIDRs[0].IP).To(HaveLen(net.IPv4len), "IPv4 in 4-byte form")

	g.Expect(u.putNode(u.withPodCIDRs("node-a", "10.1.1.0/24", "10.1.1.0/24", "fd00:10:1:2::/64"))).To(BeEmpty())
	g.Expect(u.loop.take()).To(BeEmpty(), "nothing changed")

	desc = u.putNode(u.withPodCIDRs("node-a", "10.1.1.0/24", "10.1.1.0/24"))
	g.Expect(desc).To(Equal("node node-a pod CIDRs [10.1.1.0/24 fd00:10:1:2::/64] -> [10.1.1.0/24]"))
	g.Expect(u.loop.take()).To(HaveLen(1), "back to single-stack")

	// This node: the same.
	u.putNode(u.withPodCIDRs("node-x", "10.1.4.0/24", "10.1.4.0/24", "fd00:10:1:4::/64"))
	g.Expect(u.loop.take()).To(HaveLen(1))
	desc = u.putNode(u.withPodCIDRs("node-x", "10.1.4.0/24", "10.1.4.0/24", "fd00:10:1:40::/64"))
	g.Expect(desc).To(Equal("node node-x pod CIDRs [10.1.4.0/24 fd00:10:1:4::/64] -> [10.1.4.0/24 fd00:10:1:40::/64]"))
	ups = u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].NodeName).To(Equal("node-x"))
	g.Expect(ups[0].NewState.String()).To(ContainSubstring("PodCIDR: 10.1.4.0/24, PodCIDRs: [10.1.4.0/24 fd00:10:1:40::/64]"))

	// Both families move: both lines.
	desc = u.putNode(u.withPodCIDRs("node-x", "10.1.5.0/24", "10.1.5.0/24", "fd00:10:1:5::/64"))
	g.Expect(desc).To(Equal("node node-x pod CIDR 10.1.4.0/24 -> 10.1.5.0/24, " +
		"pod CIDRs [10.1.4.0/24 fd00:10:1:40::/64] -> [10.1.5.0/24 fd00:10:1:5::/64]"))
	g.Expect(u.loop.take()).To(HaveLen(1))
}

// The order of the families counts (the first is the primary one).
func TestPodCIDRsOrderChange(t *testing.T) {
	g := NewWithT(t)
	u := newUpdater(t)
	u.putNode(u.withPodCIDRs("node-a", "10.1.1.0/24", "10.1.1.0/24", "fd00:10:1:1::/64"))
	u.loop.take()
	desc := u.putNode(u.withPodCIDRs("node-a", "fd00:10:1:1::/64", "fd00:10:1:1::/64", "10.1.1.0/24"))
	g.Expect(desc).To(Equal("node node-a pod CIDR 10.1.1.0/24 -> fd00:10:1:1::/64, " +
		"pod CIDRs [10.1.1.0/24 fd00:10:1:1::/64] -> [fd00:10:1:1::/64 10.1.1.0/24]"))
	g.Expect(u.loop.take()).To(HaveLen(1))
}

// An unparsable CIDR among pod_CIDRs is logged and left out; the others
// stay, in order.
func TestUnparsableSecondPodCIDR(t *testing.T) {
	g := NewWithT(t)
	var logs logBuffer
	u := newUpdater(t, withLogTo(&logs))

	desc := u.putNode(u.withPodCIDRs("node-a", "10.1.1.0/24", "10.1.1.0/24", "fd00:10:1:1::/200"))
	g.Expect(desc).To(BeEmpty(), "the parsable CIDRs did not change")
	g.Expect(u.loop.take()).To(BeEmpty())
	a := u.p.GetAllNodes()["node-a"]
	g.Expect(netStrings(a.PodCIDRs)).To(Equal([]string{"10.1.1.0/24"}))
	g.Expect(a.PodCIDR.String()).To(Equal("10.1.1.0/24"))
	g.Expect(logs.String()).To(And(ContainSubstring("ignoring an unparsable pod CIDR"), ContainSubstring("node=node-a"),
		ContainSubstring("field=pod_CIDRs[1]"), ContainSubstring("pod-cidr=fd00:10:1:1::/200")))

	// A bad first CIDR (pod_CIDR too): the second family stays.
	desc = u.putNode(u.withPodCIDRs("node-a", "bogus", "bogus", "fd00:10:1:1::/64"))
	g.Expect(desc).To(Equal("node node-a pod CIDR 10.1.1.0/24 -> <nil>, pod CIDRs [10.1.1.0/24] -> [fd00:10:1:1::/64]"))
	ups := u.loop.take()
	g.Expect(ups).To(HaveLen(1))
	g.Expect(ups[0].NewState.PodCIDR).To(BeNil())
	g.Expect(netStrings(ups[0].NewState.PodCIDRs)).To(Equal([]string{"fd00:10:1:1::/64"}))
	g.Expect(logs.String()).To(And(ContainSubstring("field=pod_CIDR "), ContainSubstring("field=pod_CIDRs[0]")))
}

// PodCIDR and PodCIDRs from records that have one of the fields only, or
// neither, or that disagree.
func TestPodCIDRsFromTheKubeState(t *testing.T) {
	g := NewWithT(t)
	var logs logBuffer
	db := newDB(t, etcdtest.Start(t))
	ks := map[string]*node.Node{
		"pod-cidr-only":  {Pod_CIDR: "10.1.1.0/24"},
		"pod-cidrs-only": {Pod_CIDRs: []string{"fd00:10:1:2::/64", "10.1.2.0/24"}},
		"none":           {},
		"dual":           {Pod_CIDR: "10.1.4.0/24", Pod_CIDRs: []string{"10.1.4.0/24", "fd00:10:1:4::/64"}},
		"disagree":       {Pod_CIDR: "10.1.5.0/24", Pod_CIDRs: []string{"10.1.50.0/24", "fd00:10:1:5::/64"}},
	}
	var recs []*vppnode.VppNode
	nodes := []*node.Node{}
	id := uint32(1)
	for name, n := range ks {
		n.Name = name
		nodes = append(nodes, n)
		recs = append(recs, &vppnode.VppNode{Id: id, Name: name})
		putRecord(t, db, recs[len(recs)-1])
		id++
	}
	p := newPlugin(t, "node-x", db, &loop{}, withLogTo(&logs))
	g.Expect(resync(p, api.KubeStateData{"vppnode": vppState(recs...), "node": nodeState(nodes...)})).To(Succeed())
	all := p.GetAllNodes()
	for _, tc := range []struct {
		name    string
		podCIDR string
		cidrs   []string
	}{
		{"pod-cidr-only", "10.1.1.0/24", []string{"10.1.1.0/24"}},
		{"pod-cidrs-only", "fd00:10:1:2::/64", []string{"fd00:10:1:2::/64", "10.1.2.0/24"}},
		{"none", "<nil>", []string{}},
		{"dual", "10.1.4.0/24", []string{"10.1.4.0/24", "fd00:10:1:4::/64"}},
		{"disagree", "10.1.5.0/24", []string{"10.1.50.0/24", "fd00:10:1:5::/64"}},
	} {
		n := all[tc.name]
		g.Expect(n).NotTo(BeNil(), tc.name)
		g.Expect(n.PodCIDR.String()).To(Equal(tc.podCIDR), tc.name)
		g.Expect(netStrings(n.PodCIDRs)).To(Equal(tc.cidrs), tc.name)
	}
	g.Expect(all["none"].PodCIDRs).To(BeNil())
	g.Expect(logs.String()).To(ContainSubstring("the node's pod_CIDR is not the first of its pod_CIDRs"))

	// GetAllNodes hands out deep copies of the lists.
	all["dual"].PodCIDRs[1].IP[0] = 7
	all["dual"].PodCIDRs[0] = nil
	g.Expect(netStrings(p.GetAllNodes()["dual"].PodCIDRs)).To(Equal([]string{"10.1.4.0/24", "fd00:10:1:4::/64"}))
}
