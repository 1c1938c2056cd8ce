package ksr

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// leaderLease is the lease of the current leader key of the election.
func leaderLease(t *testing.T, cli *clientv3.Client) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(t.Context(), DefaultElectionPrefix+"/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("no leader key: %v", err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// totalWrites is every key p wrote.
func totalWrites(p *Plugin) float64 {
	n := 0.0
	for _, res := range []string{node.Keyword, pod.Keyword, "namespace"} {
		n += writes(p, res, "put") + writes(p, res, "delete")
	}
	return n
}

// One replica leads and writes; the other stands by and writes nothing.
// When the leader's lease goes (its process died), the standby takes over,
// and what changed in the API meanwhile reaches etcd; the old leader
// stands by and writes nothing more.
func TestAStandbyTakesOverWhenTheLeaderIsGone(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	client := fake.NewClientset(testNode("n1", "10.1.1.0/24"))
	a := startKSR(t, newDB(t, srv), client, "a", testConfig())
	leading(t, a)
	b := startKSR(t, newDB(t, srv), client, "b", testConfig())
	g.Eventually(func() bool { return b.status.get().Synced }).WithTimeout(5 * time.Second).Should(BeTrue())

	ctx := t.Context()
	_, err := client.CoreV1().Pods("default").Create(ctx, testPod("default", "p1", "10.1.1.2"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int64 { return modRev(t, cli, pod.Key("p1", "default")) }).WithTimeout(5 * time.Second).ShouldNot(BeZero())
	g.Expect(b.status.get().Leading).To(BeFalse())
	g.Expect(totalWrites(b)).To(BeZero(), "a standby writes nothing")

	_, err = cli.Revoke(ctx, leaderLease(t, cli))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = client.CoreV1().Pods("default").Create(ctx, testPod("default", "p2", "10.1.1.3"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{})).To(Succeed())

	leading(t, b)
	g.Eventually(func() bool { return a.status.get().Leading }).WithTimeout(5 * time.Second).Should(BeFalse())
	g.Eventually(func() int64 { return modRev(t, cli, pod.Key("p2", "default")) }).WithTimeout(5 * time.Second).ShouldNot(BeZero())
	g.Eventually(func() int64 { return modRev(t, cli, node.Key("n1")) }).WithTimeout(5 * time.Second).Should(BeZero())
	aWrites := totalWrites(a)
	_, err = client.CoreV1().Pods("default").Create(ctx, testPod("default", "p3", "10.1.1.4"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int64 { return modRev(t, cli, pod.Key("p3", "default")) }).WithTimeout(5 * time.Second).ShouldNot(BeZero())
	g.Expect(totalWrites(a)).To(Equal(aWrites), "the old leader stands by")
	g.Expect(a.status.get().Leading).To(BeFalse())
}

// A clean stop resigns: the standby leads at once, without waiting for
// the lease to expire.
func TestACleanStopHandsTheLeadOver(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	client := fake.NewClientset()
	cfg := testConfig()
	cfg.ElectionTTL = time.Minute // a takeover by expiry would time the test out
	a := startKSR(t, newDB(t, srv), client, "a", cfg)
	leading(t, a)
	b := startKSR(t, newDB(t, srv), client, "b", cfg)
	g.Eventually(func() bool { return b.status.get().Synced }).WithTimeout(5 * time.Second).Should(BeTrue())
	g.Expect(a.Close()).To(Succeed())
	leading(t, b)
}
