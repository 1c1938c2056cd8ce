package nodeipamdiff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam"

	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// setup is one configuration, given to both allocators.
type setup struct {
	clusters  []string // at most one per family, the first one first
	v4Mask    int      // node mask size of the IPv4 range
	v6Mask    int      // node mask size of the IPv6 range
	service   string   // service CIDR, or ""
	secondary string   // secondary service CIDR, or ""
	existing  []*v1.Node
}

// side is one allocator on its own fake clientset. The allocator's Run is
// never called: the test calls AllocateOrOccupyCIDR and ReleaseCIDR itself,
// one at a time, as a single worker would, and keeps the informer's
// indexer (which Kubernetes' allocator reads through its lister) in step
// with the clientset.
type side struct {
	name    string
	client  *fake.Clientset
	indexer cache.Indexer
	ctx     context.Context
	alloc   func(ctx context.Context, n *v1.Node) error
	release func(ctx context.Context, n *v1.Node) error
	events  *record.FakeRecorder // ours only
}

// quiet returns a context whose klog logger discards everything:
// Kubernetes' allocator logs at Info on every patch.
func quiet(t testing.TB) context.Context {
	return klog.NewContext(t.Context(), logr.Discard())
}

func newNode(name string, cidrs ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
		n.Spec.PodCIDRs = cidrs
	}
	return n
}

// newClient returns a fake clientset and a node informer (not started)
// that both hold the existing nodes.
func newClient(t testing.TB, existing []*v1.Node) (*fake.Clientset, *v1.NodeList, informers.SharedInformerFactory, cache.Indexer) {
	t.Helper()
	// NewSimpleClientset, not NewClientset: the field-managed tracker of
	// NewClientset builds a REST mapper on every create and patch, which
	// made the random sequences take a minute instead of a second.
	// Neither allocator uses server-side apply.
	client := fake.NewSimpleClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	indexer := factory.Core().V1().Nodes().Informer().GetIndexer()
	for _, n := range existing {
		created, err := client.CoreV1().Nodes().Create(t.Context(), n.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
		if err := indexer.Add(created); err != nil {
			t.Fatalf("index node %s: %v", n.Name, err)
		}
	}
	list, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	return client, list, factory, indexer
}

func mustIPNet(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(fmt.Sprintf("CIDR %q: %v", s, err))
	}
	return n
}

func (su setup) maskOf(cidr string) int {
	if netip.MustParsePrefix(cidr).Addr().Is4() {
		return su.v4Mask
	}
	return su.v6Mask
}

// newK8s builds Kubernetes' range allocator; the error is the
// constructor's.
func newK8s(t testing.TB, su setup) (*side, error) {
	t.Helper()
	client, list, factory, indexer := newClient(t, su.existing)
	params := ipam.CIDRAllocatorParams{}
	for _, c := range su.clusters {
		params.ClusterCIDRs = append(params.ClusterCIDRs, mustIPNet(c))
		params.NodeCIDRMaskSizes = append(params.NodeCIDRMaskSizes, su.maskOf(c))
	}
	if su.service != "" {
		params.ServiceCIDR = mustIPNet(su.service)
	}
	if su.secondary != "" {
		params.SecondaryServiceCIDR = mustIPNet(su.secondary)
	}
	ctx := quiet(t)
	a, err := ipam.NewCIDRRangeAllocator(ctx, client, factory.Core().V1().Nodes(), params, list)
	if err != nil {
		return nil, err
	}
	return &side{
		name: "k8s", client: client, indexer: indexer, ctx: ctx,
		alloc:   a.AllocateOrOccupyCIDR,
		release: func(ctx context.Context, n *v1.Node) error { return a.ReleaseCIDR(klog.FromContext(ctx), n) },
	}, nil
}

// newOurs builds plugins/nodeipam's range allocator the way ksr does
// (nodeipam.New lists the nodes from the client).
func newOurs(t testing.TB, su setup) (*side, error) {
	t.Helper()
	client, _, factory, indexer := newClient(t, su.existing)
	cfg := nodeipam.DefaultConfig()
	cfg.Enabled = true
	cfg.ClusterCIDRs = su.clusters
	if su.v4Mask != 0 {
		cfg.NodeCIDRMaskSizeIPv4 = su.v4Mask
	}
	if su.v6Mask != 0 {
		cfg.NodeCIDRMaskSizeIPv6 = su.v6Mask
	}
	cfg.ServiceCIDR = su.service
	cfg.SecondaryServiceCIDR = su.secondary
	events := record.NewFakeRecorder(10000)
	ctx := quiet(t)
	a, err := nodeipam.New(ctx, nodeipam.Params{
		Client: client, Nodes: factory.Core().V1().Nodes(), Config: cfg, Recorder: events,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	return &side{name: "ours", client: client, indexer: indexer, ctx: ctx, events: events,
		alloc: a.AllocateOrOccupyCIDR, release: a.ReleaseCIDR}, nil
}

// both builds the two allocators and fails the test if either refuses the
// setup.
func both(t testing.TB, su setup) (k8s, ours *side) {
	t.Helper()
	k8s, err := newK8s(t, su)
	if err != nil {
		t.Fatalf("k8s allocator for %+v: %v", su, err)
	}
	ours, err = newOurs(t, su)
	if err != nil {
		t.Fatalf("our allocator for %+v: %v", su, err)
	}
	return k8s, ours
}

// add creates node n (in the clientset and the indexer) and hands it to
// the allocator; it returns the node's CIDRs as read back from the
// clientset and the allocator's error.
func (s *side) add(t testing.TB, n *v1.Node) ([]string, error) {
	t.Helper()
	created, err := s.client.CoreV1().Nodes().Create(s.ctx, n.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: create node %s: %v", s.name, n.Name, err)
	}
	if err := s.indexer.Add(created); err != nil {
		t.Fatalf("%s: index node %s: %v", s.name, n.Name, err)
	}
	return s.sync(t, n.Name)
}

// sync hands the node as it is now to AllocateOrOccupyCIDR again (a
// retry, or a resync) and returns its CIDRs afterwards.
func (s *side) sync(t testing.TB, name string) ([]string, error) {
	t.Helper()
	err := s.alloc(s.ctx, s.get(t, name))
	got := s.get(t, name)
	if ierr := s.indexer.Update(got); ierr != nil {
		t.Fatalf("%s: index node %s: %v", s.name, name, ierr)
	}
	return got.Spec.PodCIDRs, err
}

// del deletes the node and hands it, with the CIDRs it holds, to
// ReleaseCIDR.
func (s *side) del(t testing.TB, name string) error {
	t.Helper()
	n := s.get(t, name)
	if err := s.client.CoreV1().Nodes().Delete(s.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("%s: delete node %s: %v", s.name, name, err)
	}
	if err := s.indexer.Delete(n); err != nil {
		t.Fatalf("%s: unindex node %s: %v", s.name, name, err)
	}
	return s.release(s.ctx, n)
}

func (s *side) get(t testing.TB, name string) *v1.Node {
	t.Helper()
	n, err := s.client.CoreV1().Nodes().Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: get node %s: %v", s.name, name, err)
	}
	return n
}

// warnings drains our recorder and returns the reasons of the Warning
// events.
func (s *side) warnings() []string {
	var out []string
	for {
		select {
		case e := <-s.events.Events:
			if f := strings.Fields(e); len(f) >= 2 && f[0] == v1.EventTypeWarning {
				out = append(out, f[1])
			}
		default:
			return out
		}
	}
}

// op is one step of a sequence: "+name" adds a node without CIDRs,
// "-name" deletes it, "~name" hands it to AllocateOrOccupyCIDR again (a
// node that got nothing is retried).
type op string

func (o op) String() string { return string(o) }

// step runs o on both sides and returns what each node got; the test
// fails when the sides disagree on the CIDRs or on whether there is an
// error, and when our error for a node that got nothing does not wrap
// nodeipam.ErrNoCIDRsRemaining.
func step(t testing.TB, k8s, ours *side, o op) (cidrs []string, refused bool) {
	t.Helper()
	name := string(o[1:])
	var kc, oc []string
	var kerr, oerr error
	switch o[0] {
	case '+':
		kc, kerr = k8s.add(t, newNode(name))
		oc, oerr = ours.add(t, newNode(name))
	case '~':
		kc, kerr = k8s.sync(t, name)
		oc, oerr = ours.sync(t, name)
	case '-':
		kerr = k8s.del(t, name)
		oerr = ours.del(t, name)
		if kerr != nil || oerr != nil {
			t.Fatalf("%s: release: k8s %v, ours %v", o, kerr, oerr)
		}
		return nil, false
	default:
		t.Fatalf("op %q: want +name, -name or ~name", o)
	}
	if !slices.Equal(kc, oc) {
		t.Fatalf("%s: k8s gave %v (err %v), ours %v (err %v)", o, kc, kerr, oc, oerr)
	}
	if (kerr != nil) != (oerr != nil) {
		t.Fatalf("%s: k8s err %v, ours err %v (both gave %v)", o, kerr, oerr, kc)
	}
	if oerr != nil && !errors.Is(oerr, nodeipam.ErrNoCIDRsRemaining) {
		t.Fatalf("%s: our error %v does not wrap nodeipam.ErrNoCIDRsRemaining", o, oerr)
	}
	return kc, kerr != nil
}
