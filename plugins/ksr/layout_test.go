package ksr

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// layoutConfig is testConfig with pods in layout.
func layoutConfig(layout string) Config {
	c := testConfig()
	c.PodLayout = layout
	return c
}

// podKeysIn lists the pod keys etcd holds, of both layouts (relative to
// codec.KSRPrefix).
func podKeysIn(t testing.TB, cli *clientv3.Client) []string {
	t.Helper()
	var out []string
	for _, prefix := range []string{pod.KeyPrefix, pod.NodeKeyPrefix} {
		resp, err := cli.Get(t.Context(), codec.KSRPrefix+prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			out = append(out, string(kv.Key[len(codec.KSRPrefix):]))
		}
	}
	return out
}

// In the per-node layout a pod is written once it is scheduled, under its
// node alone; deleted, its key goes; its name reused on another node is
// written there, and the first node's key is gone.
func TestPodsAreWrittenUnderTheirNode(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	client := fake.NewClientset()
	p := startKSR(t, newDB(t, srv), client, "a", layoutConfig(PodLayoutNode))
	leading(t, p)
	cli := srv.Client(t)
	ctx := t.Context()
	keys := func() []string { return podKeysIn(t, cli) }

	web := testPod("default", "web", "")
	web, err := client.CoreV1().Pods("default").Create(ctx, web, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Consistently(keys).WithTimeout(300*time.Millisecond).Should(BeEmpty(), "not scheduled: no node to write it under")

	web.Spec.NodeName = "n1"
	web.Status.PodIP = "10.1.1.5"
	_, err = client.CoreV1().Pods("default").Update(ctx, web, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(keys).Should(Equal([]string{pod.NodeKey("n1", "web", "default")}))
	var stored1 pod.Pod
	g.Expect(stored(t, cli, pod.NodeKey("n1", "web", "default"), &stored1)).To(BeTrue())
	g.Expect(stored1.GetIpAddress()).To(Equal("10.1.1.5"))

	// Deleted and created again on n2 before the loop takes the change
	// (coalesced) or after (two syncs): one key, under n2.
	g.Expect(client.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{})).To(Succeed())
	again := testPod("default", "web", "10.1.2.7")
	again.Spec.NodeName = "n2"
	_, err = client.CoreV1().Pods("default").Create(ctx, again, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(keys).Should(Equal([]string{pod.NodeKey("n2", "web", "default")}))

	g.Expect(client.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(keys).Should(BeEmpty())
}

// A name reused on another node within one sync of the loop: the dirty
// set holds the name once, and the sync both deletes the old node's key
// and writes the new one's.
func TestASyncMovesAReusedNameToItsNewNode(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	lead, err := db.Campaign(t.Context(), "/test/election", []byte("a"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	factory := informersFor(t)
	m := &mirror{db: db, res: newResources(factory, PodLayoutNode), metrics: newKSRMetrics(), log: testLog(t)}
	store := m.res[1].informer.GetStore()
	first := testPod("default", "web", "10.1.1.5")
	first.Spec.NodeName = "n1"
	g.Expect(store.Add(first)).To(Succeed())
	_, err = m.resync(t.Context(), lead.Fence())
	g.Expect(err).NotTo(HaveOccurred())
	cli := srv.Client(t)
	g.Expect(podKeysIn(t, cli)).To(Equal([]string{pod.NodeKey("n1", "web", "default")}))

	moved := testPod("default", "web", "10.1.2.7")
	moved.Spec.NodeName = "n2"
	g.Expect(store.Update(moved)).To(Succeed())
	g.Expect(m.sync(t.Context(), lead.Fence(), map[dirtyKey]struct{}{{res: 1, storeKey: "default/web"}: {}})).To(Succeed())
	g.Expect(podKeysIn(t, cli)).To(Equal([]string{pod.NodeKey("n2", "web", "default")}))
	g.Expect(m.counts()[pod.Keyword]).To(Equal(1))

	g.Expect(store.Delete(moved)).To(Succeed())
	g.Expect(m.sync(t.Context(), lead.Fence(), map[dirtyKey]struct{}{{res: 1, storeKey: "default/web"}: {}})).To(Succeed())
	g.Expect(podKeysIn(t, cli)).To(BeEmpty())
	g.Expect(m.counts()[pod.Keyword]).To(BeZero())
}

// The upgrade of a cluster: keys of the cluster layout are kept while the
// layout is "both" (agents not upgraded read them), and deleted by the
// first resync in the "node" layout; the marker counts each pod once.
func TestSwitchingTheLayoutMigratesThePodKeys(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	scheduled := testPod("default", "web", "10.1.1.5")
	scheduled.Spec.NodeName = "n1"
	pending := testPod("default", "pending", "")

	client := fake.NewClientset(scheduled, pending)
	a := startKSR(t, newDB(t, srv), client, "a", layoutConfig(PodLayoutCluster))
	leading(t, a)
	g.Expect(podKeysIn(t, cli)).To(ConsistOf(pod.Key("web", "default"), pod.Key("pending", "default")))
	g.Expect(a.Close()).To(Succeed())

	b := startKSR(t, newDB(t, srv), fake.NewClientset(scheduled, pending), "b", layoutConfig(PodLayoutBoth))
	leading(t, b)
	g.Expect(podKeysIn(t, cli)).To(ConsistOf(pod.Key("web", "default"), pod.Key("pending", "default"),
		pod.NodeKey("n1", "web", "default")))
	m, ok := storedMarker(t, srv)
	g.Expect(ok).To(BeTrue())
	g.Expect(m.Pods).To(Equal(2), "a pod written in two layouts counts once")
	g.Expect(b.Close()).To(Succeed())

	c := startKSR(t, newDB(t, srv), fake.NewClientset(scheduled, pending), "c", layoutConfig(PodLayoutNode))
	leading(t, c)
	g.Expect(podKeysIn(t, cli)).To(Equal([]string{pod.NodeKey("n1", "web", "default")}))
	g.Expect(c.status.get().LastResync.Fixes).To(Equal(Fixes{pod.Keyword: {fixDeleted: 2}}))
}

func TestPodLayoutIsValidated(t *testing.T) {
	c := DefaultConfig()
	g := NewWithT(t)
	g.Expect(c.PodLayout).To(Equal(PodLayoutNode))
	c.PodLayout = "nodes"
	g.Expect(c.Validate()).To(MatchError(ContainSubstring(`podLayout "nodes": want "node", "cluster" or "both"`)))
}
