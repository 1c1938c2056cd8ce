package ksr

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// benchPods is the size of the cluster the benchmarks mirror.
const benchPods = 10000

// benchClient is a fake clientset holding n pods (and their namespace).
func benchClient(n int) *fake.Clientset {
	objs := make([]runtime.Object, 0, n)
	for i := range n {
		objs = append(objs, testPod("default", fmt.Sprintf("pod-%05d", i), fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)))
	}
	return fake.NewClientset(objs...)
}

// leaderOf starts a leading replica on client and returns it with a
// client of its etcd.
func leaderOf(b *testing.B, client *fake.Clientset) (*Plugin, *clientv3.Client) {
	srv := etcdtest.Start(b)
	p := startKSR(b, newDB(b, srv), client, "bench", testConfig())
	leading(b, p)
	return p, srv.Client(b)
}

// waitValue waits until etcd holds pod-00001 with ip.
func waitValue(b *testing.B, cli *clientv3.Client, ip string) {
	key := codec.KSRPrefix + pod.Key("pod-00001", "default")
	for range 100000 {
		resp, err := cli.Get(b.Context(), key)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Kvs) == 1 && strings.Contains(string(resp.Kvs[0].Value), `"`+ip+`"`) {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
	b.Fatalf("pod IP %s never reached etcd", ip)
}

// resyncNow asks p for a resync and waits for it.
func resyncNow(b *testing.B, p *Plugin) *ResyncStatus {
	before := p.status.get().LastResync
	p.resyncNow <- struct{}{}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if s := p.status.get().LastResync; s != before {
			return s
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatal("resync did not finish within a minute")
	return nil
}

// A resync of 10,000 pods that etcd holds already: it lists, compares
// and writes nothing.
func BenchmarkResyncInSync10kPods(b *testing.B) {
	p, _ := leaderOf(b, benchClient(benchPods))
	b.ResetTimer()
	for b.Loop() {
		if s := resyncNow(b, p); s.Fixed != 0 {
			b.Fatalf("fixed %d keys, want 0", s.Fixed)
		}
	}
	b.ReportMetric(float64(benchPods), "pods")
}

// A resync that restores 10,000 pods deleted from etcd behind the
// reflector: 10,000 puts in transactions of 128.
func BenchmarkResyncRestores10kPods(b *testing.B) {
	p, cli := leaderOf(b, benchClient(benchPods))
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if _, err := cli.Delete(b.Context(), "/vnf-agent/contiv-ksr/k8s/pod/", clientv3.WithPrefix()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if s := resyncNow(b, p); s.Fixed != benchPods {
			b.Fatalf("fixed %d keys, want %d", s.Fixed, benchPods)
		}
	}
	b.ReportMetric(float64(benchPods*b.N)/b.Elapsed().Seconds(), "keys/s")
}

// Pod IP changes through the informer to etcd: each op is one pod update
// observed in etcd.
func BenchmarkPodUpdateToEtcd(b *testing.B) {
	client := benchClient(100)
	_, cli := leaderOf(b, client)
	pods := client.CoreV1().Pods("default")
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		pd, err := pods.Get(b.Context(), "pod-00001", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pd.Status.PodIP = fmt.Sprintf("10.9.%d.%d", i/256%256, i%256)
		if _, err := pods.UpdateStatus(b.Context(), pd, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitValue(b, cli, pd.Status.PodIP)
	}
}
