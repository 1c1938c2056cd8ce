package resync

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// TestRestartRestoresLocalPods runs the in-process setup at a tiny size:
// after a restart's resync every local pod has the address it was given
// before, the other nodes' pods hold none of this node's addresses, and
// the next allocation is a new address.
func TestRestartRestoresLocalPods(t *testing.T) {
	g := NewWithT(t)
	s := shape{nodes: 5, pods: 60, local: 12, layout: dbresources.PodLayoutNode}
	f, err := newInProc(t, s, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.local).To(HaveLen(s.local))
	g.Expect(f.state["pod"]).To(HaveLen(s.pods))
	g.Expect(f.state["node"]).To(HaveLen(s.nodes))

	p, err := f.start(f.state)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(p.Close()).To(Succeed()) }()
	seen := map[string]bool{}
	for name, a := range f.local {
		got := p.GetPodIP(podmodel.ID{Name: name, Namespace: localNamespace})
		g.Expect(got).NotTo(BeNil(), name)
		g.Expect(got.IP.String()).To(Equal(a.String()), name)
		g.Expect(seen[a.String()]).To(BeFalse(), "address %s given twice", a)
		seen[a.String()] = true
	}
	_, found := p.GetPodFromIP(podIP(2, 0).AsSlice())
	g.Expect(found).To(BeFalse(), "another node's pod address is not this node's")
	next, err := p.AllocatePodIP(podmodel.ID{Name: "new", Namespace: localNamespace}, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen[next.String()]).To(BeFalse(), "the next allocation %s is a free address", next)
}

// BenchmarkResync measures in process, on the state of 100,000 pods over
// 1,000 nodes with 250 on this node:
//
//   - stage=decode: the DB watcher's conversion of the listed values into
//     the controller's Kubernetes state (dbresources.Decode per key);
//   - stage=watcher: the controller's DB watcher from Start to the DB
//     resync it pushes: List of the KSR prefix from an etcd server in this
//     process (through the etcd plugin), decode, and the mirror in bolt
//     (already up to date after the first op, as at a restart); B/op
//     includes what the etcd server allocates to answer;
//   - stage=ipam: a restarted IPAM plugin's first DB resync (fresh plugin
//     on the bolt file holding the 250 allocations; only Resync is timed).
func BenchmarkResync(b *testing.B) {
	f, err := newInProc(b, big, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("stage=watcher", func(b *testing.B) {
		srv := etcdtest.Start(b)
		nodes, err := big.nodeKVs()
		if err != nil {
			b.Fatal(err)
		}
		pods, err := big.podKVs(f.local)
		if err != nil {
			b.Fatal(err)
		}
		putAll(b, srv.Client(b), append(nodes, pods...))
		remote := newEtcdStore(b, srv)
		watcherResync(b, f, remote, big) // fills the mirror
		b.ReportAllocs()
		for b.Loop() {
			if n := watcherResync(b, f, remote, big); n != big.visible() {
				b.Fatalf("DB resync of %d values, want %d (this node's pods and every node)", n, big.visible())
			}
		}
		reportMS(b)
	})
	b.Run("stage=decode", func(b *testing.B) {
		nodes, err := big.nodeKVs()
		if err != nil {
			b.Fatal(err)
		}
		pods, err := big.podKVs(f.local)
		if err != nil {
			b.Fatal(err)
		}
		kvs := append(nodes, pods...)
		b.ReportAllocs()
		for b.Loop() {
			if got := decode(kvs); len(got["pod"]) != big.pods {
				b.Fatalf("decoded %d pods, want %d", len(got["pod"]), big.pods)
			}
		}
		reportMS(b)
	})
	b.Run("stage=ipam", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			p, err := f.newIPAM()
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			err = resync(p, f.state)
			b.StopTimer()
			if err == nil {
				err = checkRestored(p, f)
			}
			if cerr := p.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		reportMS(b)
	})
}

// checkRestored checks that one local pod has its address back.
func checkRestored(p *ipam.Plugin, f *inProc) error {
	name := localPodName(big.local - 1)
	got := p.GetPodIP(podmodel.ID{Name: name, Namespace: localNamespace})
	if got == nil || got.IP.String() != f.local[name].String() {
		return fmt.Errorf("pod %s: address %v after the resync, want %s", name, got, f.local[name])
	}
	return nil
}

// reportMS reports the mean time per op in milliseconds.
func reportMS(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(time.Millisecond), "ms")
}
