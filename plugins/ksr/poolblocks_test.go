package ksr

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// Only the leader grants pool blocks; when the lead moves, the new
// leader's server reads the grants back and goes on from them.
func TestOnlyTheLeaderGrantsPoolBlocks(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	client := fake.NewClientset()
	ctx := t.Context()
	for _, n := range []string{"n1", "n2"} {
		_, err := client.CoreV1().Nodes().Create(ctx, testNode(n, ""), metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	cfg := testConfig()
	cfg.PoolBlocks.ClusterCIDRs = []string{"10.64.0.0/24"}
	a := startKSR(t, newDB(t, srv), client, "a", cfg)
	leading(t, a)
	b := startKSR(t, newDB(t, srv), client, "b", cfg)
	g.Eventually(func() bool { return b.status.get().Synced }).WithTimeout(5 * time.Second).Should(BeTrue())

	claim := func(node string, v4 int) {
		value, err := json.Marshal(poolblock.Claim{Node: node, Want: map[string]int{"ipv4": v4}})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cli.Put(ctx, codec.KSRPrefix+poolblock.ClaimKey(node), string(value))
		g.Expect(err).NotTo(HaveOccurred())
	}
	grant := func(node string) []string {
		resp, err := cli.Get(ctx, codec.KSRPrefix+poolblock.GrantKey(node))
		g.Expect(err).NotTo(HaveOccurred())
		if len(resp.Kvs) == 0 {
			return nil
		}
		gr, err := poolblock.ParseGrant(resp.Kvs[0].Value)
		g.Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, p := range gr.Blocks {
			out = append(out, p.String())
		}
		return out
	}
	claim("n1", 2)
	g.Eventually(func() []string { return grant("n1") }).WithTimeout(5 * time.Second).Should(
		Equal([]string{"10.64.0.0/26", "10.64.0.64/26"}))

	_, err := cli.Revoke(ctx, leaderLease(t, cli))
	g.Expect(err).NotTo(HaveOccurred())
	leading(t, b)
	claim("n2", 1)
	g.Eventually(func() []string { return grant("n2") }).WithTimeout(5*time.Second).Should(
		Equal([]string{"10.64.0.128/26"}), "the new leader knows n1's blocks")
	g.Expect(grant("n1")).To(HaveLen(2))
	resp, err := cli.Get(ctx, codec.KSRPrefix+poolblock.GrantPrefix, clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(2))
}

func TestPoolBlocksConfigIsValidatedInKsrConf(t *testing.T) {
	g := NewWithT(t)
	c := DefaultConfig()
	c.NodeIPAM.ClusterCIDRs = []string{"10.1.0.0/16"}
	c.PoolBlocks.ClusterCIDRs = []string{"10.0.0.0/8"}
	c.PoolBlocks.MaxBlocksPerNode = 0
	err := c.Validate()
	g.Expect(err).To(MatchError(ContainSubstring(`poolBlocks.maxBlocksPerNode 0: want 1 to 1024`)))
	c.PoolBlocks.MaxBlocksPerNode = 8
	g.Expect(c.Validate()).To(MatchError(ContainSubstring(
		`poolBlocks.clusterCIDRs[0] "10.0.0.0/8": overlaps nodeIPAM.clusterCIDRs[0] "10.1.0.0/16"`)))
}

// A Node deleted while its agent runs (presence key held) stays fenced,
// and GET /contiv/v1/ksr shows it: its pod CIDR under nodeIPAM.state, its
// pool blocks under nodeIPAM.poolBlocks; the gauges count them.
func TestTheStatusShowsTheFencedNodes(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := t.Context()
	_, err := cli.Put(ctx, vppnode.PresenceKey("n1"), `{"node":"n1"}`) // n1's agent runs
	g.Expect(err).NotTo(HaveOccurred())
	client := fake.NewClientset(testNode("n1", ""))
	cfg := ipamConfig()
	cfg.PoolBlocks.ClusterCIDRs = []string{"10.64.0.0/24"}
	a := startKSR(t, newDB(t, srv), client, "a", cfg)
	leading(t, a)
	value, err := json.Marshal(poolblock.Claim{Node: "n1", Want: map[string]int{"ipv4": 1}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cli.Put(ctx, codec.KSRPrefix+poolblock.ClaimKey("n1"), string(value))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string { return mirroredCIDR(t, "n1", cli) }).WithTimeout(5 * time.Second).Should(Equal("10.1.0.0/24"))
	g.Eventually(func() int { return a.ipamStatus().PoolBlocks.Grants }).WithTimeout(5 * time.Second).Should(Equal(1))

	g.Expect(client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{})).To(Succeed())
	var s Status
	g.Eventually(func(g Gomega) {
		w := serve(a, a.statusHandler, http.MethodGet)
		g.Expect(json.Unmarshal(w.Body.Bytes(), &s)).To(Succeed())
		g.Expect(s.NodeIPAM.State.Fenced).To(ConsistOf(And(HaveField("Node", "n1"), HaveField("Blocks", []string{"10.1.0.0/24"}))))
		g.Expect(s.NodeIPAM.PoolBlocks.Fenced).To(ConsistOf(And(HaveField("Node", "n1"), HaveField("Blocks", []string{"10.64.0.0/26"}))))
	}).WithTimeout(5 * time.Second).Should(Succeed())
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(a.ipamMetrics, a.poolMetrics)
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP contiv_nodeipam_cidrs_fenced Node CIDRs of deleted Nodes kept from every other node while the deleted node's agent may still hold addresses in them, by cluster range.
# TYPE contiv_nodeipam_cidrs_fenced gauge
contiv_nodeipam_cidrs_fenced{cluster_cidr="10.1.0.0/16"} 1
# HELP contiv_nodeipam_pool_blocks_fenced Pool blocks of nodes gone from Kubernetes kept from every other node while the gone node's agent may still hold addresses in them, by family.
# TYPE contiv_nodeipam_pool_blocks_fenced gauge
contiv_nodeipam_pool_blocks_fenced{family="ipv4"} 1
`), "contiv_nodeipam_cidrs_fenced", "contiv_nodeipam_pool_blocks_fenced")).To(Succeed())
}
