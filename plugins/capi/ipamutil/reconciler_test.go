//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package ipamutil_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The test pool is a ContivIPPool read as a plain list: its addresses are
// single IPs, handed out in order to claims; an address is taken when a
// live IPAddress of the pool holds it. (Core objects cannot be pools: the
// claim's poolRef.apiGroup must not be empty.)
var poolGK = schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: "ContivIPPool"}

const (
	filter     = "suite"                   // the reconciler's WatchFilterValue
	failAnnot  = "test.contivpp.io/fail"   // a pool with it fails EnsureAddress
	wait       = 15 * time.Second          // Eventually
	still      = 700 * time.Millisecond    // Consistently
	poll       = 25 * time.Millisecond     // both
	holdPeriod = 100 * time.Millisecond    // ReleaseAddress's requeue while held
	otherKind  = "SomeoneElsesPool"        // a pool kind the adapter refuses
	releaseLog = "release"                 // journal entry of ReleaseAddress
	addressTyp = "*v1beta2.IPAddress"      // journal names of the types
	claimTyp   = "*v1beta2.IPAddressClaim" //
	readyCond  = ipamv1.IPAddressClaimReadyCondition
)

// journal records, in call order, the writes the reconciler makes through
// its client and the adapter's releases.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, fmt.Sprintf(format, args...))
}

// of returns the entries that name key.
func (j *journal) of(key types.NamespacedName) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, e := range j.entries {
		if strings.Contains(e, " "+key.String()) {
			out = append(out, e)
		}
	}
	return out
}

// recordingClient journals successful Patch and Delete calls with the
// object's finalizers after the call.
type recordingClient struct {
	client.Client
	j *journal
}

func (c recordingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, p, opts...)
	if err == nil {
		c.j.add("patch %T %s finalizers=%v", obj, client.ObjectKeyFromObject(obj), obj.GetFinalizers())
	}
	return err
}

func (c recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	if err == nil {
		c.j.add("delete %T %s", obj, client.ObjectKeyFromObject(obj))
	}
	return err
}

// listAdapter serves ContivIPPools as lists of addresses.
type listAdapter struct {
	cached client.Reader // the manager's client, with the claim indexes
	live   client.Reader // the API server, for the addresses in use
	j      *journal

	mu   sync.Mutex
	hold map[types.NamespacedName]bool // claims whose release waits
}

var (
	_ ipamutil.ProviderAdapter = (*listAdapter)(nil)
	_ ipamutil.PoolMatcher     = (*listAdapter)(nil)
	_ ipamutil.ClaimHandler    = (*listHandler)(nil)
)

func (a *listAdapter) SetupWithManager(_ context.Context, b *ctrl.Builder) error {
	b.Watches(&v1alpha1.ContivIPPool{}, handler.EnqueueRequestsFromMapFunc(ipamutil.ClaimsForPool(a.cached, poolGK)))
	return nil
}

func (a *listAdapter) ClaimHandlerFor(c client.Client, claim *ipamv1.IPAddressClaim) ipamutil.ClaimHandler {
	return &listHandler{a: a, c: c, claim: claim}
}

func (a *listAdapter) HandlesPool(ref ipamv1.IPPoolReference) bool {
	return ref.APIGroup == poolGK.Group && ref.Kind == poolGK.Kind
}

func (a *listAdapter) setHold(key types.NamespacedName, on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold[key] = on
}

type listHandler struct {
	a     *listAdapter
	c     client.Client
	claim *ipamv1.IPAddressClaim
	pool  *v1alpha1.ContivIPPool
}

func (h *listHandler) FetchPool(ctx context.Context) (client.Object, *ctrl.Result, error) {
	pool := &v1alpha1.ContivIPPool{}
	key := types.NamespacedName{Namespace: h.claim.Namespace, Name: h.claim.Spec.PoolRef.Name}
	if err := h.c.Get(ctx, key, pool); err != nil {
		return nil, nil, err
	}
	h.pool = pool
	return pool, nil, nil
}

func (h *listHandler) EnsureAddress(ctx context.Context, addr *ipamv1.IPAddress) (*ctrl.Result, error) {
	if _, ok := h.pool.Annotations[failAnnot]; ok {
		return nil, errors.New("the pool says no")
	}
	if addr.Spec.Address != "" {
		return nil, nil
	}
	list := &ipamv1.IPAddressList{}
	if err := h.a.live.List(ctx, list, client.InNamespace(h.claim.Namespace)); err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, it := range list.Items {
		if it.Spec.PoolRef == h.claim.Spec.PoolRef && it.Spec.ClaimRef.Name != h.claim.Name {
			used[it.Spec.Address] = true
		}
	}
	for _, ip := range h.pool.Spec.Addresses {
		if !used[ip] {
			addr.Spec.Address, addr.Spec.Prefix, addr.Spec.Gateway = ip, &h.pool.Spec.Prefix, h.pool.Spec.Gateway
			return nil, nil
		}
	}
	return nil, fmt.Errorf("pool %s has %d addresses, all used: %w", h.pool.Name, len(h.pool.Spec.Addresses), ipamutil.ErrPoolExhausted)
}

func (h *listHandler) ReleaseAddress(context.Context) (*ctrl.Result, error) {
	key := client.ObjectKeyFromObject(h.claim)
	h.a.mu.Lock()
	held := h.a.hold[key]
	h.a.mu.Unlock()
	if held {
		return &ctrl.Result{RequeueAfter: holdPeriod}, nil
	}
	h.a.j.add("%s %s", releaseLog, key)
	return nil, nil
}

// suite is the API server, the running manager with the reconciler, and
// a live client for the test.
type suite struct {
	c       client.Client
	j       *journal
	adapter *listAdapter
}

func newScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ipamv1.AddToScheme, ipamv1beta1.AddToScheme,
		clusterv1.AddToScheme, clusterv1beta1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// startSuite runs the manager until the test ends.
func startSuite(t *testing.T, cfg *rest.Config) *suite {
	return startSuiteAt(t, cfg, ipamutil.Versions{})
}

// startSuiteAt is startSuite with the reconciler at versions.
func startSuiteAt(t *testing.T, cfg *rest.Config, versions ipamutil.Versions) *suite {
	scheme := newScheme(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 testr.New(t),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	adapter := &listAdapter{cached: ipamutil.NewReader(mgr.GetClient(), versions), live: ipamutil.NewReader(mgr.GetAPIReader(), versions),
		j: j, hold: map[types.NamespacedName]bool{}}
	r := &ipamutil.ClaimReconciler{Client: recordingClient{Client: mgr.GetClient(), j: j}, Scheme: scheme,
		WatchFilterValue: filter, Adapter: adapter, Versions: versions}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &suite{c: c, j: j, adapter: adapter}
}

// namespace creates a namespace for one subtest.
func (s *suite) namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

func (s *suite) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := s.c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func pool(ns, name string, addresses ...string) *v1alpha1.ContivIPPool {
	return &v1alpha1.ContivIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.ContivIPPoolSpec{Addresses: addresses, Prefix: 24, Gateway: "10.0.0.254"},
	}
}

// claim of pool, labelled for the suite's watch filter.
func claim(ns, name, poolName string, edits ...func(*ipamv1.IPAddressClaim)) *ipamv1.IPAddressClaim {
	c := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.WatchLabel: filter}},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{
			APIGroup: poolGK.Group, Kind: poolGK.Kind, Name: poolName}},
	}
	for _, e := range edits {
		e(c)
	}
	return c
}

func cluster(ns, name string, edits ...func(*clusterv1.Cluster)) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.WatchLabel: filter}},
		Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}} // the CRD wants a spec with a field
	for _, e := range edits {
		e(c)
	}
	return c
}

// getClaim reads a claim; a gone claim is nil.
func (s *suite) getClaim(g Gomega, key types.NamespacedName) *ipamv1.IPAddressClaim {
	c := &ipamv1.IPAddressClaim{}
	err := s.c.Get(context.Background(), key, c)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// getAddress reads an IPAddress; a gone one is nil.
func (s *suite) getAddress(g Gomega, key types.NamespacedName) *ipamv1.IPAddress {
	a := &ipamv1.IPAddress{}
	err := s.c.Get(context.Background(), key, a)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return a
}

// readyReason is the claim's Ready status and reason ("" when unset).
func readyReason(c *ipamv1.IPAddressClaim) string {
	if c == nil {
		return "gone"
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, readyCond)
	if cond == nil {
		return ""
	}
	return string(cond.Status) + "/" + cond.Reason
}

// eventuallyReason waits for the claim's Ready "status/reason".
func (s *suite) eventuallyReason(g Gomega, key types.NamespacedName, want string) *ipamv1.IPAddressClaim {
	var c *ipamv1.IPAddressClaim
	g.Eventually(func(g Gomega) string {
		c = s.getClaim(g, key)
		return readyReason(c)
	}).WithTimeout(wait).WithPolling(poll).Should(Equal(want), "claim %s", key)
	return c
}

// untouched checks for a while that the reconciler leaves the claim alone.
func (s *suite) untouched(g Gomega, keys ...types.NamespacedName) {
	g.Consistently(func(g Gomega) {
		for _, key := range keys {
			c := s.getClaim(g, key)
			g.Expect(c.Finalizers).To(BeEmpty(), "claim %s", key)
			g.Expect(c.Status.Conditions).To(BeEmpty(), "claim %s", key)
			g.Expect(s.getAddress(g, key)).To(BeNil(), "IPAddress %s", key)
		}
	}).WithTimeout(still).WithPolling(poll).Should(Succeed())
}

func (s *suite) deleteClaim(t *testing.T, key types.NamespacedName) {
	t.Helper()
	c := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	if err := s.c.Delete(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// TestClaimReconciler runs ClaimReconciler with the list adapter on a real
// API server; each subtest works in its own namespace.
func TestClaimReconciler(t *testing.T) {
	kube := kubeenv.StartT(t, kubeenv.WithCRDs("plugins/capi/api/crd/capi", "plugins/capi/api/crd"))
	s := startSuite(t, kube.Config)
	t.Run("lifecycle", func(t *testing.T) { testLifecycle(t, s) })
	t.Run("deletion order", func(t *testing.T) { testDeletionOrder(t, s) })
	t.Run("release holds deletion", func(t *testing.T) { testReleaseHolds(t, s) })
	t.Run("paused", func(t *testing.T) { testPaused(t, s) })
	t.Run("pool not ready", func(t *testing.T) { testPoolNotReady(t, s) })
	t.Run("allocation failed", func(t *testing.T) { testAllocationFailed(t, s) })
	t.Run("pool exhausted", func(t *testing.T) { testPoolExhausted(t, s) })
	t.Run("not ours", func(t *testing.T) { testNotOurs(t, s) })
}

// A claim gets its finalizer, an IPAddress with the pool's first free
// address, owner references, the cluster label and the ProtectAddress
// finalizer, then addressRef and Ready True.
func testLifecycle(t *testing.T, s *suite) {
	ctx := context.Background()
	ns := s.namespace(t, "lifecycle")
	p := pool(ns, "p", "10.0.0.1", "10.0.0.2")
	s.create(t, p)
	s.create(t, cluster(ns, "c1"))
	cases := []struct {
		name, want string
		edit       func(*ipamv1.IPAddressClaim)
	}{
		{"by-spec", "10.0.0.1", func(c *ipamv1.IPAddressClaim) { c.Spec.ClusterName = "c1" }},
		{"by-label", "10.0.0.2", func(c *ipamv1.IPAddressClaim) { c.Labels[clusterv1.ClusterNameLabel] = "c1" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cl := claim(ns, tc.name, "p", tc.edit)
			s.create(t, cl)
			got := s.eventuallyReason(g, key(ns, tc.name), "True/Ready")
			g.Expect(got.Finalizers).To(ConsistOf(ipamutil.ReleaseAddressFinalizer))
			g.Expect(got.Status.AddressRef.Name).To(Equal(tc.name))

			addr := s.getAddress(g, key(ns, tc.name))
			g.Expect(addr).NotTo(BeNil())
			g.Expect(addr.Spec.Address).To(Equal(tc.want))
			g.Expect(addr.Spec.Prefix).To(Equal(ptr.To(int32(24))))
			g.Expect(addr.Spec.Gateway).To(Equal("10.0.0.254"))
			g.Expect(addr.Spec.ClaimRef.Name).To(Equal(tc.name))
			g.Expect(addr.Spec.PoolRef).To(Equal(cl.Spec.PoolRef))
			g.Expect(addr.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "c1"))
			g.Expect(addr.Finalizers).To(ConsistOf(ipamutil.ProtectAddressFinalizer))
			g.Expect(addr.OwnerReferences).To(ConsistOf(
				metav1.OwnerReference{APIVersion: ipamv1.GroupVersion.String(), Kind: "IPAddressClaim", Name: tc.name,
					UID: got.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
				metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ContivIPPool", Name: "p",
					UID: p.UID, BlockOwnerDeletion: ptr.To(true)}))
		})
	}
	// An IPAddress made before the claim is adopted: its spec is kept and
	// the owner references, label and finalizer are added.
	t.Run("adopted", func(t *testing.T) {
		g := NewWithT(t)
		cl := claim(ns, "adopted", "p", func(c *ipamv1.IPAddressClaim) { c.Spec.ClusterName = "c1" })
		s.create(t, &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "adopted", Namespace: ns},
			Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: "adopted"}, PoolRef: cl.Spec.PoolRef,
				Address: "10.0.0.9", Prefix: ptr.To(int32(16))}})
		s.create(t, cl)
		got := s.eventuallyReason(g, key(ns, "adopted"), "True/Ready")
		addr := s.getAddress(g, key(ns, "adopted"))
		g.Expect(addr.Spec.Address).To(Equal("10.0.0.9"))
		g.Expect(addr.Spec.Prefix).To(Equal(ptr.To(int32(16))))
		g.Expect(addr.Finalizers).To(ConsistOf(ipamutil.ProtectAddressFinalizer))
		g.Expect(addr.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "c1"))
		g.Expect(addr.OwnerReferences).To(HaveLen(2))
		g.Expect(addr.OwnerReferences[0].UID).To(Equal(got.UID))
		g.Expect(addr.OwnerReferences[1].UID).To(Equal(p.UID))
	})
	// A live claim whose IPAddress is deleted gets it back, with the same
	// address: the spec of what exists is never rewritten.
	t.Run("recreated", func(t *testing.T) {
		g := NewWithT(t)
		a := s.getAddress(g, key(ns, "by-spec"))
		a.Finalizers = nil
		g.Expect(s.c.Update(ctx, a)).To(Succeed())
		g.Expect(s.c.Delete(ctx, a)).To(Succeed())
		g.Eventually(func(g Gomega) string {
			b := s.getAddress(g, key(ns, "by-spec"))
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.UID).NotTo(Equal(a.UID))
			return b.Spec.Address
		}).WithTimeout(wait).WithPolling(poll).Should(Equal("10.0.0.1"))
	})
}

// Deleting a claim releases its address, removes the IPAddress's
// ProtectAddress finalizer, deletes the IPAddress and removes the claim's
// finalizer last, in that order.
func testDeletionOrder(t *testing.T, s *suite) {
	g := NewWithT(t)
	ns := s.namespace(t, "deletion")
	s.create(t, pool(ns, "p", "10.0.0.1"))
	k := key(ns, "d")
	s.create(t, claim(ns, k.Name, "p"))
	s.eventuallyReason(g, k, "True/Ready")
	s.deleteClaim(t, k)
	g.Eventually(func(g Gomega) {
		g.Expect(s.getClaim(g, k)).To(BeNil())
		g.Expect(s.getAddress(g, k)).To(BeNil())
	}).WithTimeout(wait).WithPolling(poll).Should(Succeed())

	entries := s.j.of(k)
	release := releaseLog + " " + k.String()
	i := slices.Index(entries, release)
	g.Expect(i).To(BeNumerically(">=", 0), "journal %v", entries)
	g.Expect(len(entries)).To(BeNumerically(">=", i+4), "journal %v", entries)
	g.Expect(entries[i : i+4]).To(Equal([]string{
		release,
		fmt.Sprintf("patch %s %s finalizers=[]", addressTyp, k),
		fmt.Sprintf("delete %s %s", addressTyp, k),
		fmt.Sprintf("patch %s %s finalizers=[]", claimTyp, k),
	}))
	// A reconcile from a cache that still holds the claim may release
	// again (ReleaseAddress is idempotent); it writes nothing.
	for _, e := range entries[i+4:] {
		g.Expect(e).To(Equal(release), "journal %v", entries)
	}
}

// A ReleaseAddress that returns a requeue Result holds the deletion with
// everything in place; once it lets go, the deletion completes.
func testReleaseHolds(t *testing.T, s *suite) {
	g := NewWithT(t)
	ns := s.namespace(t, "hold")
	s.create(t, pool(ns, "p", "10.0.0.1"))
	k := key(ns, "h")
	s.create(t, claim(ns, k.Name, "p"))
	s.eventuallyReason(g, k, "True/Ready")
	s.adapter.setHold(k, true)
	s.deleteClaim(t, k)
	g.Consistently(func(g Gomega) {
		c := s.getClaim(g, k)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.DeletionTimestamp).NotTo(BeNil())
		g.Expect(c.Finalizers).To(ConsistOf(ipamutil.ReleaseAddressFinalizer))
		a := s.getAddress(g, k)
		g.Expect(a).NotTo(BeNil())
		g.Expect(a.DeletionTimestamp).To(BeNil())
		g.Expect(a.Finalizers).To(ConsistOf(ipamutil.ProtectAddressFinalizer))
	}).WithTimeout(still).WithPolling(poll).Should(Succeed())
	s.adapter.setHold(k, false)
	g.Eventually(func(g Gomega) {
		g.Expect(s.getClaim(g, k)).To(BeNil())
		g.Expect(s.getAddress(g, k)).To(BeNil())
	}).WithTimeout(wait).WithPolling(poll).Should(Succeed())
}

// A claim of a paused cluster, or a paused claim, is left alone; it is
// served once unpaused.
func testPaused(t *testing.T, s *suite) {
	ctx := context.Background()
	ns := s.namespace(t, "paused")
	s.create(t, pool(ns, "p", "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	paused := func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }
	annotated := func(c *clusterv1.Cluster) { c.Annotations = map[string]string{clusterv1.PausedAnnotation: ""} }
	s.create(t, cluster(ns, "spec-paused", paused))
	s.create(t, cluster(ns, "annotated", annotated))
	cases := []struct {
		name    string
		edit    func(*ipamv1.IPAddressClaim)
		unpause func(g Gomega)
	}{
		{"cluster spec.paused", func(c *ipamv1.IPAddressClaim) { c.Spec.ClusterName = "spec-paused" }, func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(s.c.Get(ctx, key(ns, "spec-paused"), c)).To(Succeed())
			c.Spec.Paused = ptr.To(false)
			g.Expect(s.c.Update(ctx, c)).To(Succeed())
		}},
		{"cluster annotation", func(c *ipamv1.IPAddressClaim) { c.Labels[clusterv1.ClusterNameLabel] = "annotated" }, func(g Gomega) {
			c := &clusterv1.Cluster{}
			g.Expect(s.c.Get(ctx, key(ns, "annotated"), c)).To(Succeed())
			c.Annotations = nil
			g.Expect(s.c.Update(ctx, c)).To(Succeed())
		}},
		{"claim annotation", func(c *ipamv1.IPAddressClaim) { c.Annotations = map[string]string{clusterv1.PausedAnnotation: ""} }, func(g Gomega) {
			c := &ipamv1.IPAddressClaim{}
			g.Expect(s.c.Get(ctx, key(ns, "claim-annotation"), c)).To(Succeed())
			c.Annotations = nil
			g.Expect(s.c.Update(ctx, c)).To(Succeed())
		}},
	}
	var keys []types.NamespacedName
	for _, tc := range cases {
		name := strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), ".", "-")
		s.create(t, claim(ns, name, "p", tc.edit))
		keys = append(keys, key(ns, name))
	}
	s.untouched(NewWithT(t), keys...)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tc.unpause(g)
			s.eventuallyReason(g, keys[i], "True/Ready")
		})
	}
}

// A claim of a missing pool is PoolNotReady, then Ready once the pool
// appears (the adapter's pool watch).
func testPoolNotReady(t *testing.T, s *suite) {
	g := NewWithT(t)
	ns := s.namespace(t, "notready")
	k := key(ns, "n")
	s.create(t, claim(ns, k.Name, "late"))
	c := s.eventuallyReason(g, k, "False/PoolNotReady")
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, readyCond).Message).To(ContainSubstring(`ContivIPPool "late"`))
	g.Expect(c.Finalizers).To(ConsistOf(ipamutil.ReleaseAddressFinalizer))
	s.create(t, pool(ns, "late", "10.0.0.1"))
	s.eventuallyReason(g, k, "True/Ready")
}

// Any other handler error is AllocationFailed with the error's message.
func testAllocationFailed(t *testing.T, s *suite) {
	g := NewWithT(t)
	ns := s.namespace(t, "failed")
	p := pool(ns, "p", "10.0.0.1")
	p.Annotations = map[string]string{failAnnot: ""}
	s.create(t, p)
	k := key(ns, "f")
	s.create(t, claim(ns, k.Name, "p"))
	c := s.eventuallyReason(g, k, "False/AllocationFailed")
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, readyCond).Message).To(ContainSubstring("the pool says no"))
	g.Expect(s.getAddress(g, k)).To(BeNil())
}

// A claim of a full pool is PoolExhausted, and is served when another
// claim of the pool is deleted (the IPAddress watch and the poolRef index).
func testPoolExhausted(t *testing.T, s *suite) {
	g := NewWithT(t)
	ns := s.namespace(t, "exhausted")
	s.create(t, pool(ns, "p", "10.0.0.7"))
	first, second := key(ns, "first"), key(ns, "second")
	s.create(t, claim(ns, first.Name, "p"))
	s.eventuallyReason(g, first, "True/Ready")
	s.create(t, claim(ns, second.Name, "p"))
	c := s.eventuallyReason(g, second, "False/PoolExhausted")
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, readyCond).Message).To(ContainSubstring("all used"))
	s.deleteClaim(t, first)
	s.eventuallyReason(g, second, "True/Ready")
	g.Expect(s.getAddress(g, second).Spec.Address).To(Equal("10.0.0.7"))
}

// Claims without the suite's watch-filter label, with another value, or
// of a pool kind the adapter refuses are never written to.
func testNotOurs(t *testing.T, s *suite) {
	ns := s.namespace(t, "notours")
	s.create(t, pool(ns, "p", "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	s.create(t, claim(ns, "unlabelled", "p", func(c *ipamv1.IPAddressClaim) { c.Labels = nil }))
	s.create(t, claim(ns, "other-filter", "p", func(c *ipamv1.IPAddressClaim) { c.Labels[clusterv1.WatchLabel] = "other" }))
	s.create(t, claim(ns, "other-kind", "p", func(c *ipamv1.IPAddressClaim) { c.Spec.PoolRef.Kind = otherKind }))
	s.untouched(NewWithT(t), key(ns, "unlabelled"), key(ns, "other-filter"), key(ns, "other-kind"))
}

// The provider's controllers run on client-go's work queue, not the
// priority queue whose shutdown can deadlock in the pinned
// controller-runtime.
func TestControllerOptionsAvoidThePriorityQueue(t *testing.T) {
	g := NewWithT(t)
	o := ipamutil.ControllerOptions(3)
	g.Expect(o.MaxConcurrentReconciles).To(Equal(3))
	g.Expect(o.UsePriorityQueue).NotTo(BeNil())
	g.Expect(*o.UsePriorityQueue).To(BeFalse())
}
