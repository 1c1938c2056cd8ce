package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/nodeipam"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// ipamKSR is ksr.conf with the range allocator on clusters (/24 and /64
// per node) and the rest of the nodeIPAM section at its defaults.
func ipamKSR(clusters ...string) ksr.Config {
	return ksr.Config{NodeIPAM: nodeipam.Config{Enabled: true, AllocatorType: nodeipam.RangeAllocatorType,
		ClusterCIDRs: clusters, NodeCIDRMaskSizeIPv4: 24, NodeCIDRMaskSizeIPv6: 64}}
}

// podCIDRsOf reads spec.podCIDRs of Node name (for Eventually).
func podCIDRsOf(ctx context.Context, kube *kubeenv.Env, name string) func() ([]string, error) {
	return func() ([]string, error) {
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return n.Spec.PodCIDRs, nil
	}
}

// mirroredCIDR is the pod_CIDR contiv-ksr wrote to etcd for Node name
// (for Eventually).
func mirroredCIDR(ctx context.Context, cli *clientv3.Client, name string) func() (string, error) {
	return func() (string, error) {
		st, err := mirrored(ctx, cli)
		return st[node.Key(name)], err
	}
}

// ipamState is the allocator's state in the replica's GET /contiv/v1/ksr
// (for Eventually; an error while it has none).
func ipamState(ctx context.Context, k *cluster.KSR) func() (*ksr.NodeIPAMStatus, error) {
	return func() (*ksr.NodeIPAMStatus, error) {
		st, err := k.Status(ctx)
		if err == nil && (st.NodeIPAM == nil || st.NodeIPAM.State == nil) {
			err = fmt.Errorf("%s: no nodeIPAM state in its status (%+v)", k.Name, st.NodeIPAM)
		}
		return st.NodeIPAM, err
	}
}

// usedIn is the number of taken blocks of the first range (for Eventually).
func usedIn(ctx context.Context, k *cluster.KSR) func() (uint64, error) {
	return func() (uint64, error) {
		st, err := ipamState(ctx, k)()
		if err != nil {
			return 0, err
		}
		return st.State.Ranges[0].Used, nil
	}
}

// allPodCIDRs reads spec.podCIDRs of every Node: name -> CIDRs (nil for
// a Node without).
func allPodCIDRs(ctx context.Context, client kubernetes.Interface) (map[string][]string, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(nodes.Items))
	for _, n := range nodes.Items {
		out[n.Name] = n.Spec.PodCIDRs
	}
	return out, nil
}

// withCIDRs counts the Nodes that hold pod CIDRs (for Eventually).
func withCIDRs(ctx context.Context, client kubernetes.Interface) func() (int, error) {
	return func() (int, error) {
		all, err := allPodCIDRs(ctx, client)
		n := 0
		for _, cidrs := range all {
			if len(cidrs) > 0 {
				n++
			}
		}
		return n, err
	}
}

// claims lists the claim keys left in etcd under the default claimPrefix.
func claims(ctx context.Context, cli *clientv3.Client) ([]string, error) {
	resp, err := cli.Get(ctx, nodeipam.DefaultClaimPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out, nil
}

// fastClient is a clientset of the test (not of contiv-ksr) whose rate
// limit does not slow down a burst of creates.
func fastClient(g Gomega, kube *kubeenv.Env) kubernetes.Interface {
	cfg := rest.CopyConfig(kube.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	return client
}

// nodeNames are prefix-00000 ... for n Nodes.
func nodeNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

// createNodes creates the Nodes names without pod CIDRs, with workers
// clients at once; it returns the first error.
func createNodes(ctx context.Context, client kubernetes.Interface, names []string, workers int) error {
	next := make(chan string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for name := range next {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
				if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create node %s: %w", name, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for _, name := range names {
		select {
		case next <- name:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs // nil once closed and empty
	}
	return err
}

// expectDistinctInside checks that every Node of names holds pod CIDRs,
// one inside each of clusters (in their order), and that no block is held
// twice.
func expectDistinctInside(g Gomega, cidrs map[string][]string, names []string, clusters ...string) {
	holder := map[string]string{}
	for _, name := range names {
		got := cidrs[name]
		g.Expect(got).To(HaveLen(len(clusters)), "the pod CIDRs of %s", name)
		for i, s := range got {
			p, err := netip.ParsePrefix(s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(netip.MustParsePrefix(clusters[i]).Contains(p.Addr())).To(BeTrue(),
				"%s of node %s inside %s", s, name, clusters[i])
			g.Expect(holder).NotTo(HaveKey(s), "%s handed to %s and %s", s, holder[s], name)
			holder[s] = name
		}
	}
}

// killWhenSomeHaveCIDRs SIGKILLs k once at least one of the Nodes holds
// pod CIDRs, and returns how many held them once k was dead.
func killWhenSomeHaveCIDRs(t *testing.T, g Gomega, kube *kubeenv.Env, k *cluster.KSR) int {
	t.Helper()
	ctx := t.Context()
	g.Eventually(withCIDRs(ctx, kube.Client)).WithTimeout(30*time.Second).WithPolling(5*time.Millisecond).
		Should(BeNumerically(">", 0), "nodes that got CIDRs from %s", k.Name)
	g.Expect(k.Kill()).To(Succeed())
	done, err := withCIDRs(ctx, kube.Client)()
	g.Expect(err).NotTo(HaveOccurred())
	return done
}

// The allocator gives new Nodes a /24 each, contiv-ksr mirrors it into
// etcd and an agent with useExternalIPAM takes it as its pod subnet. A
// deleted Node's CIDR is free again and handed out once the cursor comes
// round to it. The cluster range is 10.1.0.0/21 (inside the agent's
// podSubnetCIDR 10.1.0.0/16) and the serviceCIDR 10.1.4.0/22 takes its
// upper half, so exactly four blocks, 10.1.0.0/24 to 10.1.3.0/24, can be
// handed out: small enough to see next-fit and its wrap-around.
func TestNodeIPAMFeedsTheAgent(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	conf := ipamKSR("10.1.0.0/21")
	conf.NodeIPAM.ServiceCIDR = "10.1.4.0/22"
	k := c.AddKSRT(t, conf)
	cli := c.ClientT(t)
	agentConf := map[string]string{"contiv.conf": externalConf}
	// Started before its Node: it waits, unready, for the pod CIDR.
	a := c.AddAgentT(t, cluster.AgentOptions{Node: "feed-a", Conf: agentConf, Unready: true})

	createNode(t, kube, "feed-a", "")
	g.Eventually(podCIDRsOf(ctx, kube, "feed-a")).WithTimeout(10*time.Second).
		Should(Equal([]string{"10.1.0.0/24"}), "the first block, on the Node in the API")
	g.Eventually(mirroredCIDR(ctx, cli, "feed-a")).WithTimeout(10*time.Second).
		Should(Equal("10.1.0.0/24"), "pod_CIDR of k8s/node/feed-a in etcd")
	g.Eventually(podSubnet(ctx, a)).WithTimeout(15*time.Second).
		Should(Equal("10.1.0.0/24"), "the agent's podSubnetThisNode")

	for _, n := range []struct{ name, want string }{{"feed-b", "10.1.1.0/24"}, {"feed-c", "10.1.2.0/24"}} {
		createNode(t, kube, n.name, "")
		g.Eventually(podCIDRsOf(ctx, kube, n.name)).WithTimeout(10*time.Second).Should(Equal([]string{n.want}), n.name)
	}
	st, err := ipamState(ctx, k)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Running).To(BeTrue(), "the allocator runs on the only replica")
	g.Expect(st.State.Ranges).To(Equal([]nodeipam.Usage{{ClusterCIDR: "10.1.0.0/21", MaskSize: 24, Size: 4, Used: 3, Free: 1}}),
		"the range without the service blocks")

	// feed-a's node goes away: its agent stops, then the Node is deleted.
	g.Expect(a.Stop(cluster.StopTimeout)).To(Succeed())
	deleteNode(t, kube, "feed-a")
	g.Eventually(usedIn(ctx, k)).WithTimeout(10*time.Second).Should(BeEquivalentTo(2), "blocks used after the delete")

	// Next-fit: the cursor is on 10.1.2.0/24, so feed-d gets 10.1.3.0/24,
	// not the freed 10.1.0.0/24; feed-e finds the service blocks taken,
	// wraps round and gets exactly the freed block.
	createNode(t, kube, "feed-d", "")
	g.Eventually(podCIDRsOf(ctx, kube, "feed-d")).WithTimeout(10*time.Second).Should(Equal([]string{"10.1.3.0/24"}),
		"next-fit: the block after the last one handed out")
	e := c.AddAgentT(t, cluster.AgentOptions{Node: "feed-e", Conf: agentConf, Unready: true})
	createNode(t, kube, "feed-e", "")
	g.Eventually(podCIDRsOf(ctx, kube, "feed-e")).WithTimeout(10*time.Second).Should(Equal([]string{"10.1.0.0/24"}),
		"after the wrap-around: the block feed-a held")
	g.Eventually(podSubnet(ctx, e)).WithTimeout(15*time.Second).
		Should(Equal("10.1.0.0/24"), "feed-e's agent takes the freed block as its pod subnet")
	g.Eventually(usedIn(ctx, k)).WithTimeout(10*time.Second).Should(BeEquivalentTo(4), "the range is full")
	g.Expect(claims(ctx, cli)).To(BeEmpty(), "claims left in etcd")
}

// A node holds both families, IPv4 first as in clusterCIDRs.
func TestNodeIPAMDualStack(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	k := c.AddKSRT(t, ipamKSR("10.1.0.0/16", "fd00:10::/56"))
	cli := c.ClientT(t)
	createNode(t, kube, "dual-a", "")
	createNode(t, kube, "dual-b", "")
	g.Eventually(podCIDRsOf(ctx, kube, "dual-a")).WithTimeout(10*time.Second).
		Should(HaveLen(2), "dual-a's spec.podCIDRs")
	g.Eventually(podCIDRsOf(ctx, kube, "dual-b")).WithTimeout(10*time.Second).
		Should(HaveLen(2), "dual-b's spec.podCIDRs")
	cidrs, err := allPodCIDRs(ctx, kube.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([][]string{cidrs["dual-a"], cidrs["dual-b"]}).To(ConsistOf(
		[]string{"10.1.0.0/24", "fd00:10::/64"}, []string{"10.1.1.0/24", "fd00:10:0:1::/64"}),
		"one block of each range per node, IPv4 then IPv6")
	n, err := kube.Client.CoreV1().Nodes().Get(ctx, "dual-a", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Spec.PodCIDR).To(Equal(n.Spec.PodCIDRs[0]), "spec.podCIDR is the first of spec.podCIDRs")
	g.Eventually(mirroredCIDR(ctx, cli, "dual-a")).WithTimeout(10*time.Second).Should(Equal(n.Spec.PodCIDR),
		"pod_CIDR in etcd")
	st, err := ipamState(ctx, k)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.State.Ranges).To(HaveLen(2))
	for _, r := range st.State.Ranges {
		g.Expect(r.Used).To(BeEquivalentTo(2), "blocks used in %s", r.ClusterCIDR)
	}
}

// burstNodes is the number of Nodes created at once in the restart and
// failover scenarios. Their contiv-ksr runs with kubeQPS 5 (burst 10), one
// patch per Node: 40 Nodes take 5 to 6 s to be given their CIDRs, a window
// wide enough to kill it in the middle.
const burstNodes = 40

// slowQPS is the kubeQPS of the restart and failover scenarios.
const slowQPS = 5

// contiv-ksr SIGKILLed while it hands out CIDRs to a burst of new Nodes
// leaves claims (and Nodes without CIDRs) behind; a new replica reads the
// Nodes and the claims before it hands anything out, so no block goes to
// two Nodes and no claim is left.
func TestNodeIPAMRestartHandsNothingOutTwice(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	const cluster4 = "10.1.0.0/16"
	conf := ipamKSR(cluster4)
	conf.ElectionTTL = electionTTL // the new replica leads once the dead one's lease is over
	conf.KubeQPS = slowQPS
	k1 := c.AddKSRT(t, conf)
	cli := c.ClientT(t)
	names := nodeNames("rs", burstNodes)
	burstAndKill(t, g, kube, cli, k1, names)

	k2 := c.AddKSRT(t, conf)
	expectEachServedOnce(g, kube, cli, names, cluster4, "after the restart")
	g.Eventually(usedIn(ctx, k2)).WithTimeout(10*time.Second).Should(BeEquivalentTo(len(names)),
		"blocks the new replica counts as used")
}

// The leader SIGKILLed in the middle of a burst: the standby leads after
// the lease, reads the Nodes and the claims and finishes; no block goes to
// two Nodes and no claim is left.
func TestNodeIPAMFailoverHandsNothingOutTwice(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	const cluster4 = "10.1.0.0/16"
	conf := ipamKSR(cluster4)
	conf.ElectionTTL = electionTTL
	conf.KubeQPS = slowQPS
	k1, k2 := c.AddKSRT(t, conf), c.AddKSRT(t, conf)
	cli := c.ClientT(t)
	var leader *cluster.KSR
	g.Eventually(func(g Gomega) { leader = leaderOf(ctx, k1, k2)(g) }).Should(Succeed(), "one leader")
	standby := k1
	if leader == k1 {
		standby = k2
	}
	st, err := standby.Status(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.NodeIPAM).NotTo(BeNil())
	g.Expect(st.NodeIPAM.Running).To(BeFalse(), "the standby's allocator")

	names := nodeNames("fo", burstNodes)
	killed := burstAndKill(t, g, kube, cli, leader, names)

	g.Eventually(leading(ctx, standby)).WithTimeout(electionTTL+5*time.Second).WithPolling(100*time.Millisecond).
		Should(BeTrue(), "the standby leads")
	t.Logf("the standby led %s after the kill", time.Since(killed).Round(10*time.Millisecond))
	expectEachServedOnce(g, kube, cli, names, cluster4, "after the failover")
	ipam, err := ipamState(ctx, standby)()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ipam.Running).To(BeTrue(), "the new leader's allocator")
	g.Expect(ipam.Error).To(BeEmpty())
	g.Expect(ipam.State.Ranges[0].Used).To(BeEquivalentTo(len(names)), "blocks the new leader counts as used")
	g.Expect(ipam.State.Pending).To(BeEmpty(), "pending nodes")
}

// burstAndKill creates names at once and SIGKILLs victim as soon as some
// (not all) have CIDRs; it returns when the kill happened.
func burstAndKill(t *testing.T, g Gomega, kube *kubeenv.Env, cli *clientv3.Client, victim *cluster.KSR, names []string) time.Time {
	t.Helper()
	ctx := t.Context()
	fast := fastClient(g, kube)
	created := make(chan error, 1)
	go func() { created <- createNodes(ctx, fast, names, 16) }()
	done := killWhenSomeHaveCIDRs(t, g, kube, victim)
	killed := time.Now()
	g.Expect(<-created).To(Succeed())
	left, err := claims(ctx, cli)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%d of %d nodes had CIDRs when %s was killed; %d claims left", done, len(names), victim.Name, len(left))
	g.Expect(done).To(BeNumerically("<", len(names)), "the kill came while CIDRs were being handed out")
	return killed
}

// expectEachServedOnce waits until every node of names has a CIDR, all
// distinct and inside cluster4, and no claim is left.
func expectEachServedOnce(g Gomega, kube *kubeenv.Env, cli *clientv3.Client, names []string, cluster4, when string) {
	ctx := context.Background()
	g.Eventually(withCIDRs(ctx, kube.Client)).WithTimeout(60*time.Second).Should(Equal(len(names)),
		"nodes with CIDRs "+when)
	cidrs, err := allPodCIDRs(ctx, kube.Client)
	g.Expect(err).NotTo(HaveOccurred())
	expectDistinctInside(g, cidrs, names, cluster4)
	g.Eventually(func() ([]string, error) { return claims(ctx, cli) }).WithTimeout(10*time.Second).
		Should(BeEmpty(), "claims left in etcd")
}
