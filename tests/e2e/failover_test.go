package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// electionTTL is the lease of the leadership in the failover scenario.
const electionTTL = 2 * time.Second

// leaderOf returns the replica whose status says it leads, and checks
// that every replica names it as the leader (for Eventually).
func leaderOf(ctx context.Context, ks ...*cluster.KSR) func(g Gomega) *cluster.KSR {
	return func(g Gomega) *cluster.KSR {
		var leaders []*cluster.KSR
		var identity string
		for _, k := range ks {
			st, err := k.Status(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			if st.Leading {
				leaders, identity = append(leaders, k), st.Identity
			}
		}
		g.Expect(leaders).To(HaveLen(1), "replicas that lead")
		for _, k := range ks {
			st, err := k.Status(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Leader).To(Equal(identity), "the leader %s names", k.Name)
		}
		return leaders[0]
	}
}

// leading tells whether the replica's status says it leads.
func leading(ctx context.Context, k *cluster.KSR) func() (bool, error) {
	return func() (bool, error) {
		st, err := k.Status(ctx)
		return st.Leading, err
	}
}

// When the leading contiv-ksr is killed, the standby takes over within
// the lease TTL (plus a margin) and its first resync writes what changed
// in the API while nobody led: etcd ends up equal to the API.
func TestLeaderFailoverCatchesUpWithTheGap(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	conf := ksr.Config{ElectionTTL: electionTTL}
	k1, k2 := c.AddKSRT(t, conf), c.AddKSRT(t, conf)
	cli := c.ClientT(t)
	createNode(t, kube, "fo-1", "10.1.1.0/24")
	createPod(t, kube, "default", "keep", "fo-1", "10.1.1.10")
	createPod(t, kube, "default", "moved", "fo-1", "10.1.1.11")
	createPod(t, kube, "default", "deleted", "fo-1", "10.1.1.12")
	g.Eventually(stateEqual(ctx, kube, cli)).WithTimeout(15*time.Second).Should(Succeed(), "etcd mirrors the API")

	var leader *cluster.KSR
	g.Eventually(func(g Gomega) { leader = leaderOf(ctx, k1, k2)(g) }).Should(Succeed(), "one leader")
	standby := k1
	if leader == k1 {
		standby = k2
	}
	g.Expect(leader.Kill()).To(Succeed())
	killed := time.Now()

	createPod(t, kube, "default", "new", "fo-1", "10.1.1.13")
	setPodIP(t, kube, "default", "moved", "10.1.1.21")
	deletePod(t, kube, "default", "deleted")
	createNode(t, kube, "fo-2", "10.1.2.0/24")
	g.Expect(leading(ctx, standby)()).To(BeFalse(),
		"the API changed %s after the kill, before the lease expired", time.Since(killed))

	g.Eventually(leading(ctx, standby)).WithTimeout(time.Until(killed.Add(electionTTL+3*time.Second))).
		WithPolling(100*time.Millisecond).Should(BeTrue(), "the standby leads within the TTL and a margin")
	t.Logf("the standby led %s after the kill", time.Since(killed).Round(10*time.Millisecond))
	g.Eventually(stateEqual(ctx, kube, cli)).WithTimeout(10*time.Second).Should(Succeed(),
		"etcd equals the API after the failover")
	api, err := inAPI(ctx, kube.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(api).To(And(HaveKeyWithValue(pod.NodeKey("fo-1", "moved", "default"), "10.1.1.21"),
		HaveKeyWithValue(pod.NodeKey("fo-1", "new", "default"), "10.1.1.13"), HaveKeyWithValue(node.Key("fo-2"), "10.1.2.0/24"),
		Not(HaveKey(pod.NodeKey("fo-1", "deleted", "default")))),
		"the changes reached the API")
}

// stateEqual checks that the mirrored keys and key fields in etcd equal
// the API's (for Eventually).
func stateEqual(ctx context.Context, kube *kubeenv.Env, cli *clientv3.Client) func(g Gomega) {
	return func(g Gomega) {
		api, err := inAPI(ctx, kube.Client)
		g.Expect(err).NotTo(HaveOccurred())
		etcd, err := mirrored(ctx, cli)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(etcd).To(Equal(api))
	}
}

// A leader stopped cleanly (SIGINT) resigns: the standby leads at once,
// long before the lease TTL would have run out.
func TestCleanStopHandsTheLeadOverAtOnce(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	kube := kubeenv.StartT(t)
	c := cluster.StartT(t, cluster.TestBins(t), kube.Kubeconfig)
	const ttl = 10 * time.Second
	conf := ksr.Config{ElectionTTL: ttl}
	k1, k2 := c.AddKSRT(t, conf), c.AddKSRT(t, conf)
	var leader *cluster.KSR
	g.Eventually(func(g Gomega) { leader = leaderOf(ctx, k1, k2)(g) }).Should(Succeed(), "one leader")
	standby := k1
	if leader == k1 {
		standby = k2
	}
	stopped := time.Now()
	g.Expect(leader.Stop(cluster.StopTimeout)).To(Succeed(), "the leader's exit status after SIGINT")
	g.Eventually(leading(ctx, standby)).WithTimeout(time.Until(stopped.Add(ttl/4))).WithPolling(50*time.Millisecond).
		Should(BeTrue(), "the standby leads well within the TTL (%s)", ttl)
	t.Logf("the standby led %s after SIGINT to the leader", time.Since(stopped).Round(time.Millisecond))
}
