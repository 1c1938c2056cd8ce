package ksr

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// modelRun is one randomized run: API changes, etcd tampering and lost
// leases in random order, two replicas.
type modelRun struct {
	t      *testing.T
	rnd    *rand.Rand
	client *fake.Clientset
	cli    *clientv3.Client
}

// Random API changes, keys tampered with in etcd and leaders that lose
// their lease, in any order: once the API is quiet and the leader has
// resynced, etcd holds exactly the API's objects (key set and the fields
// the agents read), and a further resync finds nothing to fix.
func TestRandomChangesConvergeToTheAPI(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			g := NewWithT(t)
			srv := etcdtest.Start(t)
			r := &modelRun{t: t, rnd: rand.New(rand.NewPCG(seed, 7)), client: fake.NewClientset(), cli: srv.Client(t)}
			a := startKSR(t, newDB(t, srv), r.client, "a", testConfig())
			b := startKSR(t, newDB(t, srv), r.client, "b", testConfig())
			for range 150 {
				r.step()
			}
			r.resync(g, a, b)
			r.checkEqual(g)
			last := r.resync(g, a, b)
			g.Expect(last.Fixed).To(BeZero(), "converged: nothing left to fix")
		})
	}
}

// step makes one random change.
func (r *modelRun) step() {
	ctx := context.Background()
	name := fmt.Sprintf("o%d", r.rnd.IntN(6))
	ip := fmt.Sprintf("10.1.1.%d", 2+r.rnd.IntN(200))
	var err error
	switch r.rnd.IntN(9) {
	case 0, 1:
		_, err = r.client.CoreV1().Pods("default").Create(ctx, testPod("default", name, ip), metav1.CreateOptions{})
	case 2:
		err = r.client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
	case 3:
		err = r.updatePodIP(ctx, name, ip)
	case 4:
		_, err = r.client.CoreV1().Nodes().Create(ctx, testNode(name, "10.2."+fmt.Sprint(r.rnd.IntN(250))+".0/24"), metav1.CreateOptions{})
	case 5:
		err = r.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	case 6:
		_, err = r.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	case 7:
		r.tamper(ctx, name, ip)
	case 8:
		if r.rnd.IntN(4) == 0 {
			r.dropLeader(ctx)
		}
	}
	_ = err // conflicts (exists, not found) are part of the game
	if r.rnd.IntN(5) == 0 {
		time.Sleep(time.Duration(r.rnd.IntN(3)) * time.Millisecond) // let the loop interleave
	}
}

func (r *modelRun) updatePodIP(ctx context.Context, name, ip string) error {
	p, err := r.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	p.Status.PodIP = ip
	_, err = r.client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// tamper plants, deletes or corrupts a mirrored key behind the reflector.
func (r *modelRun) tamper(ctx context.Context, name, ip string) {
	key := codec.KSRPrefix + []string{pod.Key(name, "default"), node.Key(name), namespace.Key(name)}[r.rnd.IntN(3)]
	var err error
	if r.rnd.IntN(2) == 0 {
		_, err = r.cli.Delete(ctx, key)
	} else {
		_, err = r.cli.Put(ctx, key, `{"name":"`+name+`","ip_address":"`+ip+`"}`)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// dropLeader revokes the leader's lease, as if its process died.
func (r *modelRun) dropLeader(ctx context.Context) {
	resp, err := r.cli.Get(ctx, DefaultElectionPrefix+"/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return
	}
	_, _ = r.cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
}

// resync has the replica that leads now resync, and returns that
// resync's status (the lead may move while it asks: it asks again).
func (r *modelRun) resync(g Gomega, ps ...*Plugin) *ResyncStatus {
	var got *ResyncStatus
	g.Eventually(func() bool {
		for _, p := range ps {
			before := p.status.get().LastResync
			if !p.status.get().Leading || before == nil {
				continue
			}
			select {
			case p.resyncNow <- struct{}{}:
			default: // one is pending already
			}
			for range 200 {
				if s := p.status.get().LastResync; s != before {
					got = s
					return true
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		return false
	}).WithTimeout(20*time.Second).Should(BeTrue(), "the leader resynced")
	return got
}

// checkEqual compares etcd with the API: the same keys, and the fields
// the agents read.
func (r *modelRun) checkEqual(g Gomega) {
	ctx := context.Background()
	want := map[string]string{}
	pods, _ := r.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		want[pod.Key(p.Name, p.Namespace)] = p.Status.PodIP
	}
	nodes, _ := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	for _, n := range nodes.Items {
		want[node.Key(n.Name)] = n.Spec.PodCIDR
	}
	nss, _ := r.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	for _, n := range nss.Items {
		want[namespace.Key(n.Name)] = ""
	}
	got := map[string]string{}
	resp, err := r.cli.Get(ctx, codec.KSRPrefix+"k8s/", clientv3.WithPrefix())
	g.Expect(err).NotTo(HaveOccurred())
	for _, kv := range resp.Kvs {
		key := strings.TrimPrefix(string(kv.Key), codec.KSRPrefix)
		switch {
		case strings.HasPrefix(key, pod.KeyPrefix):
			var m pod.Pod
			g.Expect(codec.Unmarshal(kv.Value, &m)).To(Succeed())
			got[key] = m.GetIpAddress()
		case strings.HasPrefix(key, node.KeyPrefix):
			var m node.Node
			g.Expect(codec.Unmarshal(kv.Value, &m)).To(Succeed())
			got[key] = m.GetPod_CIDR()
		default:
			got[key] = ""
		}
	}
	g.Expect(got).To(Equal(want))
}
