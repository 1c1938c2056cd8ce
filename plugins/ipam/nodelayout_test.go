package ipam_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// nodePods is the Kubernetes state of the per-node layout: the pods under
// this node's prefix, as an agent of it lists them.
func nodePods(pods ...*podmodel.Pod) api.KubeStateData {
	ks := api.KubeStateData{podmodel.Keyword: {}}
	for _, p := range pods {
		ks[podmodel.Keyword][podmodel.NodeKey(thisNode, p.Name, p.Namespace)] = p
	}
	return ks
}

// Pods of the per-node layout are restored like pods of the cluster
// layout: their keys are accepted, their addresses learned.
func TestPodsOfTheNodeLayoutAreRestored(t *testing.T) {
	g := NewWithT(t)
	ks := nodePods(&podmodel.Pod{Name: "pod1", Namespace: "default", IpAddress: "1.2.128.10"})
	i := mustFixture(t, fixtureOpts{}, ks).ipam
	g.Expect(i.GetPodIP(pod1).String()).To(Equal("1.2.128.10/32"))
	ip, err := i.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.128.11"), "next-fit continues after the restored address")
}

// The marker counts the cluster's pods; an agent that reads its node's
// pods alone does not take the difference for an emptied store: its
// absent pods are release candidates (and a cluster-layout state still
// is compared: TestAStoreEmptierThanTheMarkerOrAnOldMarkerIsNoEvidence).
func TestANodeScopedStateIsNotComparedWithTheClusterCount(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{clock: clk})
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	f.pods = 10
	f.beat(t)
	ks := nodePods(bystander) // 1 pod of this node; 10 in the cluster
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	got := candidates(g, f)
	g.Expect(got.Blocked).To(BeEmpty())
	g.Expect(got.Candidates).To(HaveLen(1))
}

// A node with no pod at the resync learns that its state is node-scoped
// from the first pod event of its prefix.
func TestAPodEventOfTheNodeLayoutScopesAnEmptyState(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{clock: clk})
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	f.pods = 10
	f.beat(t)
	ks := nodePods()
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	empty := candidates(g, f)
	g.Expect(empty.Candidates).To(BeEmpty(), "an empty state is no evidence")
	g.Expect(empty.Blocked).NotTo(ContainSubstring("emptier than the mirror"), "a node without pods is not compared with the cluster's count")

	ev := &api.KubeStateChange{Resource: podmodel.Keyword, Key: podmodel.NodeKey(thisNode, bystander.Name, bystander.Namespace),
		NewValue: bystander}
	_, err := f.ipam.Update(ev, nil)
	g.Expect(err).NotTo(HaveOccurred())
	f.beat(t)
	got := candidates(g, f)
	g.Expect(got.Blocked).To(BeEmpty())
	g.Expect(got.Candidates).To(HaveLen(1))

	// The same event under the cluster layout's key is compared.
	f2 := newRESTFixture(t, restOpts{clock: clk})
	mustAdd(g, f2.ipam, pod1, att("c1", "eth0"))
	f2.pods = 10
	f2.beat(t)
	g.Expect(f2.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	kubeChange(g, f2.ipam, podmodel.GetID(bystander), "", false)
	f2.beat(t)
	g.Expect(candidates(g, f2).Blocked).To(ContainSubstring("holds 1 pods, contiv-ksr's mirror marker says 10"))
}
