package ksr

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

func testNode(name, cidr string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDR: cidr, ProviderID: "test://" + name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "192.168.16.1"},
			{Type: corev1.NodeHostName, Address: name},
		}},
	}
}

func testPod(ns, name, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"contivpp.io/custom-if": "memif1/memif", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{PodIP: ip, HostIP: "192.168.16.1"},
	}
}

// Nodes, pods and namespaces reach etcd in the models' format; an update
// that changes no mirrored field writes nothing.
func TestMirrorsInTheModelsFormatAndWritesOnlyChanges(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	client := fake.NewClientset()
	p := startKSR(t, db, client, "a", testConfig())
	leading(t, p)
	cli := srv.Client(t)

	ctx := t.Context()
	_, err := client.CoreV1().Nodes().Create(ctx, testNode("n1", "10.1.1.0/24"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "team", Labels: map[string]string{"env": "prod"}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = client.CoreV1().Pods("team").Create(ctx, testPod("team", "web", "10.1.1.5"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	var n node.Node
	g.Eventually(func() bool { return stored(t, cli, node.Key("n1"), &n) }).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Expect(n.GetPod_CIDR()).To(Equal("10.1.1.0/24"))
	g.Expect(n.GetProvider_ID()).To(Equal("test://n1"))
	g.Expect(n.GetAddresses()).To(HaveLen(2))
	g.Expect(n.GetAddresses()[0].GetType()).To(Equal(node.NodeAddress_NodeInternalIP))
	g.Expect(n.GetAddresses()[0].GetAddress()).To(Equal("192.168.16.1"))

	var pd pod.Pod
	g.Eventually(func() bool { return stored(t, cli, pod.Key("web", "team"), &pd) }).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Expect(pd.GetIpAddress()).To(Equal("10.1.1.5"))
	g.Expect(pd.GetHostIpAddress()).To(Equal("192.168.16.1"))
	g.Expect(pd.GetLabels()).To(Equal(map[string]string{"app": "web", "tier": "front"}))
	g.Expect(pd.GetLabel()).To(HaveLen(2))
	g.Expect(pd.GetLabel()[0].GetKey()).To(Equal("app"), "the list form is sorted")
	g.Expect(pd.GetAnnotations()).To(Equal(map[string]string{"contivpp.io/custom-if": "memif1/memif"}), "only contivpp.io annotations")
	g.Expect(pd.GetContainer()).To(HaveLen(1))
	g.Expect(pd.GetContainer()[0].GetPort()[0].GetContainerPort()).To(BeEquivalentTo(80))

	var ns namespace.Namespace
	g.Eventually(func() bool { return stored(t, cli, namespace.Key("team"), &ns) }).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Expect(ns.GetLabels()).To(HaveKeyWithValue("env", "prod"))

	// The phase is not mirrored: updating it writes nothing. A second pod
	// created after it is the barrier (one informer delivers in order).
	rev := modRev(t, cli, pod.Key("web", "team"))
	// The counter moves right after the write commits, on the loop.
	g.Eventually(func() float64 { return writes(p, pod.Keyword, "put") }).Should(BeEquivalentTo(1), "web was written once")
	web, err := client.CoreV1().Pods("team").Get(ctx, "web", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	web.Status.Phase = corev1.PodRunning
	_, err = client.CoreV1().Pods("team").UpdateStatus(ctx, web, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = client.CoreV1().Pods("team").Create(ctx, testPod("team", "barrier", "10.1.1.6"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int64 { return modRev(t, cli, pod.Key("barrier", "team")) }).WithTimeout(5 * time.Second).ShouldNot(BeZero())
	g.Expect(modRev(t, cli, pod.Key("web", "team"))).To(Equal(rev), "an unmirrored change is not written")
	g.Eventually(func() float64 { return writes(p, pod.Keyword, "put") }).Should(BeEquivalentTo(2))
	g.Consistently(func() float64 { return writes(p, pod.Keyword, "put") }).WithTimeout(200*time.Millisecond).
		Should(BeEquivalentTo(2), "only the barrier pod was written")

	// A mirrored change is written; a delete deletes.
	web.Status.PodIP = "10.1.1.7"
	_, err = client.CoreV1().Pods("team").UpdateStatus(ctx, web, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string {
		stored(t, cli, pod.Key("web", "team"), &pd)
		return pd.GetIpAddress()
	}).WithTimeout(5 * time.Second).Should(Equal("10.1.1.7"))
	g.Expect(client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() int64 { return modRev(t, cli, node.Key("n1")) }).WithTimeout(5 * time.Second).Should(BeZero())
}

// A resync deletes stale keys, writes missing ones, rewrites changed ones
// and counts each fix; keys outside the mirrored prefixes are left alone.
func TestResyncSweepsAndCountsWhatItFixed(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	client := fake.NewClientset(testNode("n1", "10.1.1.0/24"), testPod("default", "web", "10.1.1.5"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	cli := srv.Client(t)
	ctx := t.Context()
	// Before the first leader: a stale pod, a node value from another
	// writer, and keys that are not ours to sweep.
	for k, v := range map[string]string{
		pod.Key("ghost", "default"):     `{"name":"ghost","namespace":"default"}`,
		node.Key("n1"):                  `{"name":"n1","pod_CIDR":"10.9.9.0/24"}`,
		"allocatedIDs/1":                `{"id":1,"name":"n1"}`,
		"k8s/nodeconfig/n1":             `{}`,
		namespace.Key("gone-namespace"): `{"name":"gone-namespace"}`,
	} {
		_, err := cli.Put(ctx, codec.KSRPrefix+k, v)
		g.Expect(err).NotTo(HaveOccurred())
	}
	p := startKSR(t, db, client, "a", testConfig())
	leading(t, p)
	first := p.status.get().LastResync
	g.Expect(first.Fixes).To(Equal(Fixes{
		pod.Keyword:       {fixAdded: 1, fixDeleted: 1},
		node.Keyword:      {fixUpdated: 1},
		namespace.Keyword: {fixAdded: 1, fixDeleted: 1},
	}))
	g.Expect(first.Mirrored).To(Equal(map[string]int{pod.Keyword: 1, node.Keyword: 1, namespace.Keyword: 1}))
	g.Eventually(func() float64 { return testutil.ToFloat64(p.metrics.fixes.WithLabelValues(pod.Keyword, fixDeleted)) }).
		Should(BeEquivalentTo(1), "counted right after the status")
	g.Expect(modRev(t, cli, "allocatedIDs/1")).NotTo(BeZero(), "node IDs are not swept")
	g.Expect(modRev(t, cli, "k8s/nodeconfig/n1")).NotTo(BeZero(), "unmirrored resources are not swept")
	var n node.Node
	g.Expect(stored(t, cli, node.Key("n1"), &n)).To(BeTrue())
	g.Expect(n.GetPod_CIDR()).To(Equal("10.1.1.0/24"))

	// A key planted later is swept by the next resync; so is a key deleted
	// behind the reflector's back restored.
	_, err := cli.Put(ctx, codec.KSRPrefix+pod.Key("planted", "default"), `{"name":"planted"}`)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cli.Delete(ctx, codec.KSRPrefix+pod.Key("web", "default"))
	g.Expect(err).NotTo(HaveOccurred())
	p.resyncNow <- struct{}{}
	g.Eventually(func() Fixes {
		if s := p.status.get().LastResync; s != first {
			return s.Fixes
		}
		return nil
	}).WithTimeout(5 * time.Second).Should(Equal(Fixes{pod.Keyword: {fixAdded: 1, fixDeleted: 1}}))
	g.Expect(modRev(t, cli, pod.Key("planted", "default"))).To(BeZero())
	g.Expect(modRev(t, cli, pod.Key("web", "default"))).NotTo(BeZero())
}

// A write whose fence no longer holds (another replica leads) is refused
// as a whole and leaves the mirror to be rebuilt.
func TestAFencedWriteOfALostLeadershipIsRefused(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	lead, err := db.Campaign(t.Context(), "/test/election", []byte("a"), 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	m := &mirror{db: db, res: newResources(informersFor(t), PodLayoutNode), metrics: newKSRMetrics(), log: testLog(t), held: map[string][]byte{}, keysOf: map[dirtyKey][]string{}}
	g.Expect(lead.Resign(t.Context())).To(Succeed())
	err = m.apply(t.Context(), lead.Fence(), []change{{res: m.res[0], key: node.Key("n1"), value: []byte(`{"name":"n1"}`)}})
	g.Expect(err).To(MatchError(errLostLead))
	g.Expect(m.valid()).To(BeFalse(), "the next step must be a resync")
	g.Expect(modRev(t, srv.Client(t), node.Key("n1"))).To(BeZero())
	g.Expect(testutil.ToFloat64(m.metrics.writes.WithLabelValues(node.Keyword, "put"))).To(BeZero())
}
