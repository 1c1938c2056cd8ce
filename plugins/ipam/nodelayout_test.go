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

// markedFixture is a REST fixture holding pod1's address, whose marker
// counts 10 pods in the cluster, resynced on the state ks.
func markedFixture(t *testing.T, g Gomega, clk *fakeClock, ks api.KubeStateData) *restFixture {
	f := newRESTFixture(t, restOpts{clock: clk})
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	f.pods = 10
	f.beat(t)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	return f
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
	f := markedFixture(t, g, newFakeClock(), nodePods(bystander)) // 1 pod of this node; 10 in the cluster
	got := candidates(g, f)
	g.Expect(got.Blocked).To(BeEmpty())
	g.Expect(got.Candidates).To(HaveLen(1))
}

// A node with no pod at the resync learns that its state is node-scoped
// from the first pod event of its prefix.
func TestAPodEventOfTheNodeLayoutScopesAnEmptyState(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := markedFixture(t, g, clk, nodePods())
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
	f2 := markedFixture(t, g, clk, nodePods())
	kubeChange(g, f2.ipam, podmodel.GetID(bystander), "", false)
	f2.beat(t)
	g.Expect(candidates(g, f2).Blocked).To(ContainSubstring("holds 1 pods, contiv-ksr's mirror marker says 10"))
}

// A cluster-layout state whose pods the watch deleted one by one, down
// to none, is still compared with the marker's count: an emptied store is
// no evidence (only a state empty at its resync is exempt, and it
// releases nothing).
func TestAStateEmptiedByTheWatchIsStillComparedWithTheMarker(t *testing.T) {
	g := NewWithT(t)
	f := markedFixture(t, g, newFakeClock(), kubePods(bystander))
	kubeChange(g, f.ipam, podmodel.GetID(bystander), "", true)
	f.beat(t)
	got := candidates(g, f)
	g.Expect(got.Blocked).To(ContainSubstring("holds 0 pods, contiv-ksr's mirror marker says 10"))
	g.Expect(got.Candidates).To(BeEmpty())
}
