package pool_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
	"github.com/contiv-ipam/agent/plugins/capi/pool"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

const (
	wait = 60 * time.Second
	poll = 50 * time.Millisecond
)

// env is a real API server with the CRDs, a client on it, and the clock
// of the providers' grace periods.
type env struct {
	cfg    *rest.Config
	c      client.Client // at versions, through ipamutil.NewClient
	raw    client.Client // the API server as it is
	scheme *k8sruntime.Scheme
	clock  *stepClock
	// versions are those the providers talk.
	versions ipamutil.Versions
}

// stepClock is the real time until frozen; advance then moves it forward
// and lets it run again from there, so it never goes back. A grace period
// measured on it ends only when the test says, however slow the machine.
type stepClock struct {
	mu     sync.Mutex
	frozen bool
	at     time.Time     // the time while frozen
	offset time.Duration // added to the real time while running
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return c.at
	}
	return time.Now().Add(c.offset)
}

func (c *stepClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// freeze stops the clock at its current time.
func (c *stepClock) freeze() {
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen, c.at = true, now
}

// resumeAt lets the clock run again from to (at least where it stands).
func (c *stepClock) resumeAt(to time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if to.Before(c.at) {
		to = c.at
	}
	c.frozen, c.offset = false, time.Until(to)
}

func startEnv(t *testing.T) *env {
	t.Helper()
	kube := kubeenv.StartT(t, kubeenv.WithCRDs("plugins/capi/api/crd", "plugins/capi/api/crd/capi"))
	scheme, err := pool.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(kube.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &env{cfg: cfg, c: c, raw: c, scheme: scheme, clock: &stepClock{}}
}

// startProvider runs the provider in a manager until stop (or the test's
// end).
func (e *env) startProvider(t *testing.T, workers int) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(e.cfg, ctrl.Options{
		Scheme: e.scheme, Logger: logr.Discard(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := pool.Setup(ctx, mgr, pool.Options{MaxConcurrentReconciles: workers, Clock: e.clock, Versions: e.versions}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			// A stop that runs into the manager's 30 s timeout was the
			// priority queue's shutdown deadlock (see
			// ipamutil.ControllerOptions): it fails the test, with the
			// stacks.
			if err := <-done; err != nil {
				buf := make([]byte, 1<<20)
				t.Errorf("manager shutdown: %v; goroutines:\n%s", err, buf[:runtime.Stack(buf, true)])
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func ptr[T any](v T) *T { return &v }

func (e *env) namespace(t *testing.T, name string) string {
	t.Helper()
	if err := e.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

func newPool(ns, name string, spec v1alpha1.ContivIPPoolSpec) *v1alpha1.ContivIPPool {
	return &v1alpha1.ContivIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func newClaim(ns, name, kind, poolName string) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind, Name: poolName}}}
}

// createClaims creates n claims named prefix-i with 16 goroutines.
func (e *env) createClaims(t *testing.T, ns, prefix, kind, poolName string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan string)
	for range 16 {
		wg.Go(func() {
			for name := range work {
				errs <- e.c.Create(context.Background(), newClaim(ns, name, kind, poolName))
			}
		})
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// readyReason is the reason of the claim's Ready condition ("" if none).
func readyReason(c *ipamv1.IPAddressClaim) (bool, string) {
	cond := meta.FindStatusCondition(c.Status.Conditions, ipamv1.IPAddressClaimReadyCondition)
	if cond == nil {
		return false, ""
	}
	return cond.Status == metav1.ConditionTrue, cond.Reason
}

// addresses returns the addresses of the namespace's IPAddresses by
// claim, and fails on an address held twice.
func (e *env) addresses(g Gomega, namespaces ...string) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	holder := map[netip.Addr]string{}
	for _, ns := range namespaces {
		var list ipamv1.IPAddressList
		g.Expect(e.c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		for _, ip := range list.Items {
			a := netip.MustParseAddr(ip.Spec.Address)
			who := ns + "/" + ip.Spec.ClaimRef.Name
			g.Expect(holder).NotTo(HaveKey(a), "%s held by %s and %s", a, holder[a], who)
			holder[a], out[who] = who, a
		}
	}
	return out
}

// readyCount is how many of the namespace's claims are Ready.
func (e *env) readyCount(g Gomega, ns string) int {
	var list ipamv1.IPAddressClaimList
	g.Expect(e.c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	n := 0
	for i := range list.Items {
		if ok, _ := readyReason(&list.Items[i]); ok {
			n++
		}
	}
	return n
}

// status is the pool's status counts (nil before the first).
func (e *env) status(g Gomega, ns, name string) *v1alpha1.PoolAddresses {
	var p v1alpha1.ContivIPPool
	g.Expect(e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
	return p.Status.Addresses
}
