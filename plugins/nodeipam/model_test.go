package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// faults makes node patches fail at random: before they apply, or after
// (the outcome a client cannot tell from a timeout).
type faults struct {
	mu  sync.Mutex
	rnd *rand.Rand
	on  bool
}

func (f *faults) roll() (before, after bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return false, false
	}
	x := f.rnd.IntN(10)
	return x == 0, x == 1
}

// install adds the fault reactor to client.
func (f *faults) install(client *fake.Clientset) {
	gvr := v1.SchemeGroupVersion.WithResource("nodes")
	client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		pa := action.(k8stesting.PatchAction)
		if pa.GetSubresource() != "" {
			return false, nil, nil
		}
		before, after := f.roll()
		switch {
		case before:
			return true, nil, apierrors.NewServiceUnavailable("injected before")
		case after:
			applyCIDRs(client, gvr, pa)
			return true, nil, apierrors.NewTimeoutError("injected after", 1)
		}
		return false, nil, nil
	})
}

// applyCIDRs applies a pod CIDR patch straight to the tracker (the fake
// client's lock is held by the reactor chain).
func applyCIDRs(client *fake.Clientset, gvr schema.GroupVersionResource, pa k8stesting.PatchAction) {
	obj, err := client.Tracker().Get(gvr, "", pa.GetName())
	if err != nil {
		return
	}
	n := obj.(*v1.Node).DeepCopy()
	if n.Spec.PodCIDR != "" {
		return
	}
	var p struct {
		Spec struct {
			PodCIDR  string   `json:"podCIDR"`
			PodCIDRs []string `json:"podCIDRs"`
		} `json:"spec"`
	}
	if json.Unmarshal(pa.GetPatch(), &p) == nil {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = p.Spec.PodCIDR, p.Spec.PodCIDRs
		n.ResourceVersion = ""
		_ = client.Tracker().Update(gvr, n, "")
	}
}

// TestModelRandomNodesFaultsAndRestarts: nodes come and go at random,
// patches fail before or after they apply, and the allocator is replaced
// (a restart or a takeover: a new one on the same ledger) in the middle.
// At rest, no two nodes share a block, every block is inside the range,
// every node holds one (the range is large enough), and no claim is left.
func TestModelRandomNodesFaultsAndRestarts(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 7))
	g := NewWithT(t)
	client := fake.NewClientset()
	f := &faults{rnd: rand.New(rand.NewPCG(seed, 8)), on: true}
	f.install(client)
	ledger := NewMemLedger()
	cfg := testConfig("10.0.0.0/16", "fd00::/56") // 256 blocks each, 40 node names
	stop := runModelAllocator(t, client, ledger, cfg)
	live := map[string]bool{}
	ctx := context.Background()
	for step := range 300 {
		name := fmt.Sprintf("n%d", rnd.IntN(40))
		if live[name] {
			g.Expect(client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			delete(live, name)
		} else {
			n := node(name)
			n.UID = types.UID(fmt.Sprintf("uid-%s-%d", name, step))
			_, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			live[name] = true
		}
		if step%75 == 74 {
			stop()
			stop = runModelAllocator(t, client, ledger, cfg)
		}
	}
	f.mu.Lock()
	f.on = false
	f.mu.Unlock()
	g.Eventually(func(g Gomega) { checkModel(g, client, ledger, live, cfg) }).WithTimeout(20 * time.Second).Should(Succeed())
	stop()
}

// runModelAllocator starts an allocator with its own informer; the
// returned function stops both.
func runModelAllocator(t *testing.T, client *fake.Clientset, ledger Ledger, cfg Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory, nodes := startInformer(ctx, client)
	a, err := New(ctx, Params{Client: client, Nodes: nodes, Config: cfg, Ledger: ledger,
		Recorder: record.NewFakeRecorder(10000), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx.Done()) }()
	return func() { cancel(); <-done; factory.Shutdown() }
}

// checkModel asserts the invariants at rest.
func checkModel(g Gomega, client *fake.Clientset, ledger Ledger, live map[string]bool, cfg Config) {
	list, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Items).To(HaveLen(len(live)))
	ranges, _ := cfg.Ranges()
	holder := map[netip.Prefix]string{}
	for _, n := range list.Items {
		cidrs, err := NodeCIDRs(&n)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cidrs).To(HaveLen(2), "node %s holds a CIDR of each range", n.Name)
		for i, c := range cidrs {
			g.Expect(ranges.Clusters[i].Contains(c.Addr())).To(BeTrue(), "%s of %s", c, n.Name)
			g.Expect(c.Bits()).To(Equal(ranges.MaskSizes[i]))
			g.Expect(holder).NotTo(HaveKey(c), "%s held by %s and %s", c, holder[c], n.Name)
			holder[c] = n.Name
		}
	}
	claims, _ := ledger.List(context.Background())
	g.Expect(claims).To(BeEmpty())
}
