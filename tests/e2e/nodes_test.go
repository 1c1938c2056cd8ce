package e2e

import (
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// Two agents with two node names on one etcd claim two node IDs and get
// two pod subnets; a pod whose status.podIP is in node A's subnet is
// learned by agent A at its resync and by agent A only.
func TestTwoAgentsOwnSubnetsAndPods(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	c.AddKSRT(t, ksr.Config{MirrorHeartbeat: 300 * time.Millisecond})
	cli := c.ClientT(t)
	createNode(t, kube, "node-a", "")
	createNode(t, kube, "node-b", "")
	a := c.AddAgentT(t, cluster.AgentOptions{Node: "node-a", Conf: map[string]string{"ipam.conf": "absentPodGracePeriod: 2s\n"}})
	b := c.AddAgentT(t, cluster.AgentOptions{Node: "node-b"})

	ia, ib := ipamOf(t, a), ipamOf(t, b)
	g.Expect(ia.NodeName).To(Equal("node-a"))
	g.Expect(ib.NodeName).To(Equal("node-b"))
	g.Expect(ia.NodeID).NotTo(BeZero())
	g.Expect(ib.NodeID).NotTo(BeZero())
	g.Expect(ia.NodeID).NotTo(Equal(ib.NodeID), "node IDs")
	g.Expect(netip.MustParsePrefix(ia.PodSubnetThisNode).Overlaps(netip.MustParsePrefix(ib.PodSubnetThisNode))).
		To(BeFalse(), "pod subnets %s and %s", ia.PodSubnetThisNode, ib.PodSubnetThisNode)
	g.Expect(allocatedIDs(t.Context(), cli)).To(Equal(map[uint32]string{ia.NodeID: "node-a", ib.NodeID: "node-b"}),
		"allocatedIDs/ in etcd")

	ipA, ipB := host(g, ia.PodSubnetThisNode, 10), host(g, ib.PodSubnetThisNode, 10)
	createPod(t, kube, "default", "pod-a", "node-a", ipA)
	createPod(t, kube, "default", "pod-b", "node-b", ipB)
	g.Eventually(mirrored).WithContext(t.Context()).WithArguments(cli).WithTimeout(15*time.Second).Should(And(
		HaveKeyWithValue(pod.NodeKey("node-a", "pod-a", "default"), ipA), HaveKeyWithValue(pod.NodeKey("node-b", "pod-b", "default"), ipB)),
		"contiv-ksr mirrors both pods with their IPs")

	g.Expect(a.Resync(t.Context())).To(Succeed())
	g.Expect(b.Resync(t.Context())).To(Succeed())
	g.Eventually(podIPs(t.Context(), a)).WithTimeout(15*time.Second).Should(HaveKeyWithValue("default/pod-a", ipA),
		"agent A learns its pod at the resync")
	g.Eventually(podIPs(t.Context(), b)).WithTimeout(15*time.Second).Should(HaveKeyWithValue("default/pod-b", ipB),
		"agent B learns its pod at the resync")
	g.Expect(podIPs(t.Context(), a)()).NotTo(HaveKey("default/pod-b"), "agent A holds B's pod")
	g.Expect(podIPs(t.Context(), b)()).NotTo(HaveKey("default/pod-a"), "agent B holds A's pod")

	deletePod(t, kube, "default", "pod-a")
	g.Eventually(podIPs(t.Context(), a)).WithTimeout(15*time.Second).ShouldNot(HaveKey("default/pod-a"),
		"agent A releases the address of a pod deleted from the API, once still missing a grace period later")
	g.Expect(podIPs(t.Context(), b)()).To(HaveKeyWithValue("default/pod-b", ipB), "agent B keeps its pod")
}
