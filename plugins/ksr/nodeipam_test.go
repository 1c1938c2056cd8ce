package ksr

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
)

// ipamConfig is testConfig with node IPAM on 10.1.0.0/16 in /24s.
func ipamConfig() Config {
	c := testConfig()
	c.NodeIPAM.Enabled = true
	c.NodeIPAM.ClusterCIDRs = []string{"10.1.0.0/16"}
	return c
}

// Only the leader runs the node CIDR allocator; the node's CIDR reaches
// etcd through the mirror. When the lead moves, the new leader's
// allocator continues from what the Nodes hold and the old one stops.
func TestOnlyTheLeaderAllocatesNodeCIDRs(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	client := fake.NewClientset()
	a := startKSR(t, newDB(t, srv), client, "a", ipamConfig())
	leading(t, a)
	b := startKSR(t, newDB(t, srv), client, "b", ipamConfig())
	g.Eventually(func() bool { return b.status.get().Synced }).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Eventually(func() bool { return a.ipamStatus().Running }).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Expect(b.ipamStatus().Running).To(BeFalse(), "a standby runs no allocator")

	ctx := t.Context()
	create := func(name string) {
		_, err := client.CoreV1().Nodes().Create(ctx, testNode(name, ""), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	create("n1")
	g.Eventually(func() string { return mirroredCIDR(t, "n1", cli) }).WithTimeout(5 * time.Second).Should(Equal("10.1.0.0/24"))

	_, err := cli.Revoke(ctx, leaderLease(t, cli))
	g.Expect(err).NotTo(HaveOccurred())
	leading(t, b)
	g.Eventually(func() bool { return b.ipamStatus().Running }).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Eventually(func() bool { return a.ipamStatus().Running }).WithTimeout(5 * time.Second).Should(BeFalse())
	create("n2")
	g.Eventually(func() string { return mirroredCIDR(t, "n2", cli) }).WithTimeout(5 * time.Second).Should(Equal("10.1.1.0/24"))
	g.Expect(b.ipamStatus().State.Ranges[0].Used).To(Equal(uint64(2)))
	g.Eventually(func(g Gomega) {
		g.Expect(b.ipamStatus().State.Pending).To(BeEmpty())
		claims, err := cli.Get(context.Background(), ipamConfig().NodeIPAM.ClaimPrefix, clientv3.WithPrefix())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claims.Kvs).To(BeEmpty(), "claims are deleted once the Nodes hold their CIDRs")
	}).WithTimeout(5 * time.Second).Should(Succeed())
}

// mirroredCIDR is the pod_CIDR etcd holds for the node ("" if none).
func mirroredCIDR(t *testing.T, name string, cli *clientv3.Client) string {
	var n node.Node
	if !stored(t, cli, node.Key(name), &n) {
		return ""
	}
	return n.GetPod_CIDR()
}
