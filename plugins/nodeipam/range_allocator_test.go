package nodeipam

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// rig is a range allocator on a fake clientset with a running informer.
type rig struct {
	client  *fake.Clientset
	alloc   *RangeAllocator
	events  *record.FakeRecorder
	ledger  *MemLedger
	cancel  func()
	stopped chan struct{}
}

func testConfig(clusters ...string) Config {
	c := DefaultConfig()
	c.Enabled = true
	c.ClusterCIDRs = clusters
	c.InitialRetry = 10 * time.Millisecond
	c.MaxBackoff = 50 * time.Millisecond
	return c
}

func node(name string, cidrs ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
		n.Spec.PodCIDRs = cidrs
	}
	return n
}

func newRig(t *testing.T, cfg Config, ledger *MemLedger, nodes ...*v1.Node) *rig {
	t.Helper()
	client := fake.NewClientset()
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ledger == nil {
		ledger = NewMemLedger()
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nodeInf := factory.Core().V1().Nodes()
	nodeInf.Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	events := record.NewFakeRecorder(1000)
	a, err := New(ctx, Params{Client: client, Nodes: nodeInf, Config: cfg, Ledger: ledger, Recorder: events})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &rig{client: client, alloc: a.(*RangeAllocator), events: events, ledger: ledger, cancel: cancel, stopped: make(chan struct{})}
	go func() { defer close(r.stopped); r.alloc.Run(ctx.Done()) }()
	t.Cleanup(func() { cancel(); <-r.stopped; factory.Shutdown() })
	return r
}

func (r *rig) cidrsOf(g Gomega, name string) []string {
	n, err := r.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return n.Spec.PodCIDRs
}

func (r *rig) create(t *testing.T, n *v1.Node) {
	t.Helper()
	if _, err := r.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) delete(t *testing.T, name string) {
	t.Helper()
	if err := r.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRangeAllocatorGivesNodesWithoutCIDRsTheNextBlocks(t *testing.T) {
	g := NewWithT(t)
	r := newRig(t, testConfig("10.0.0.0/22"), nil, node("a", "10.0.1.0/24"))
	r.create(t, node("b"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "b")).To(Equal([]string{"10.0.0.0/24"})) }).Should(Succeed())
	r.create(t, node("c"))
	g.Eventually(func(g Gomega) { g.Expect(r.cidrsOf(g, "c")).To(Equal([]string{"10.0.2.0/24"})) }).Should(Succeed())
	r.delete(t, "b")
	g.Eventually(func() []string { return r.alloc.Status().Pending }).Should(BeEmpty())
	g.Eventually(func() uint64 { return r.alloc.Status().Ranges[0].Used }).Should(Equal(uint64(2)))
	for i := range 2 {
		r.create(t, node(fmt.Sprintf("d%d", i)))
	}
	g.Eventually(func(g Gomega) {
		got := append(r.cidrsOf(g, "d0"), r.cidrsOf(g, "d1")...)
		g.Expect(got).To(ConsistOf("10.0.3.0/24", "10.0.0.0/24"))
	}).Should(Succeed())
	claims, _ := r.ledger.List(context.Background())
	g.Expect(claims).To(BeEmpty())
}
