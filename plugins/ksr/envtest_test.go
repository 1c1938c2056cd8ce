package ksr

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// seconds bounds how long a change in the API may take to reach etcd.
const seconds = 10 * time.Second

// Against a real kube-apiserver: Nodes (podCIDR, addresses) and Pods
// (status.podIP through the status subresource) reach etcd in the models'
// format within seconds; updates and deletes follow; a key planted in
// etcd that the API does not have is swept by the periodic resync.
func TestMirrorsARealAPIServer(t *testing.T) {
	g := NewWithT(t)
	env := kubeenv.StartT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	cfg := testConfig()
	cfg.ResyncPeriod = time.Second
	p := startKSR(t, newDB(t, srv), env.Client, "a", cfg)
	leading(t, p)
	ctx := t.Context()
	nodes, pods := env.Client.CoreV1().Nodes(), env.Client.CoreV1().Pods("default")

	n, err := nodes.Create(ctx, testNode("worker-1", "10.1.7.0/24"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.16.7"}}
	_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var nm node.Node
	g.Eventually(func() []*node.NodeAddress {
		stored(t, cli, node.Key("worker-1"), &nm)
		return nm.GetAddresses()
	}).WithTimeout(seconds).Should(HaveLen(1))
	g.Expect(nm.GetPod_CIDR()).To(Equal("10.1.7.0/24"))
	g.Expect(nm.GetAddresses()[0].GetAddress()).To(Equal("192.168.16.7"))

	pd := testPod("default", "web", "")
	pd.Spec.NodeName = "worker-1"
	pd, err = pods.Create(ctx, pd, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pd.Status.PodIP, pd.Status.HostIP = "10.1.7.9", "192.168.16.7"
	pd.Status.PodIPs = []corev1.PodIP{{IP: "10.1.7.9"}}
	pd, err = pods.UpdateStatus(ctx, pd, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var pm pod.Pod
	g.Eventually(func() string {
		stored(t, cli, pod.Key("web", "default"), &pm)
		return pm.GetIpAddress()
	}).WithTimeout(seconds).Should(Equal("10.1.7.9"))
	g.Expect(pm.GetHostIpAddress()).To(Equal("192.168.16.7"))
	g.Expect(pm.GetAnnotations()).To(Equal(map[string]string{"contivpp.io/custom-if": "memif1/memif"}))
	var nsm namespace.Namespace
	g.Eventually(func() bool { return stored(t, cli, namespace.Key("default"), &nsm) }).WithTimeout(seconds).Should(BeTrue())

	// Updates follow.
	pd.Status.PodIP, pd.Status.PodIPs = "10.1.7.10", []corev1.PodIP{{IP: "10.1.7.10"}}
	_, err = pods.UpdateStatus(ctx, pd, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string {
		stored(t, cli, pod.Key("web", "default"), &pm)
		return pm.GetIpAddress()
	}).WithTimeout(seconds).Should(Equal("10.1.7.10"))

	// A planted key is swept by the periodic resync, and counted.
	_, err = cli.Put(ctx, codec.KSRPrefix+pod.Key("ghost", "default"), `{"name":"ghost","namespace":"default","ip_address":"10.1.7.99"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int64 { return modRev(t, cli, pod.Key("ghost", "default")) }).WithTimeout(seconds).Should(BeZero())
	g.Eventually(func() float64 { return testutil.ToFloat64(p.metrics.fixes.WithLabelValues(pod.Keyword, fixDeleted)) }).
		Should(BeNumerically(">=", 1), "counted right after the resync")

	// Deletes follow.
	g.Expect(pods.Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})).To(Succeed())
	g.Eventually(func() int64 { return modRev(t, cli, pod.Key("web", "default")) }).WithTimeout(seconds).Should(BeZero())
	g.Expect(nodes.Delete(ctx, "worker-1", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func() int64 { return modRev(t, cli, node.Key("worker-1")) }).WithTimeout(seconds).Should(BeZero())
}
