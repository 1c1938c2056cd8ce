package capi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/pool"
	"github.com/contiv-ipam/agent/tests/bench/internal/kubebench"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The setup.
const (
	poolCIDR    = "10.10.0.0/21"
	gateway     = "10.10.0.1"
	clientQPS   = 1000
	clientBurst = 2000
	workers     = 8  // contiv-capi-ipam's -max-concurrent-reconciles
	creators    = 16 // clients creating the claims at once
	namespace   = "bench"
	poolName    = "p"
)

// result is one run's figures.
type result struct {
	elapsed time.Duration
	created time.Duration // from the first create until the last one returned
	writes  int64         // API writes of the provider's client while timed
	kinds   map[string]int64
}

// runOnce serves n claims on a fresh API server. The timer of b (nil in
// a test) runs from the first create until every claim is Ready.
func runOnce(tb testing.TB, b *testing.B, n int) (result, error) {
	ctx := tb.Context()
	kube, err := kubeenv.Start(tb.TempDir(), kubeenv.WithCRDs("plugins/capi/api/crd", "plugins/capi/api/crd/capi"))
	if err != nil {
		return result{}, err
	}
	defer func() {
		if err := kube.Stop(); err != nil {
			tb.Logf("%v", err)
		}
	}()
	scheme, err := pool.NewScheme()
	if err != nil {
		return result{}, err
	}
	driver, err := unthrottled(kube.Config, scheme)
	if err != nil {
		return result{}, err
	}
	counter := &writeCounter{}
	stop, err := startProvider(tb, kube.Config, scheme, counter)
	if err != nil {
		return result{}, err
	}
	defer stop()
	if err := createPool(ctx, driver); err != nil {
		return result{}, err
	}
	rw := readyWatch(driver)
	defer rw.Stop()
	if _, err := rw.Relist(ctx); err != nil {
		return result{}, err
	}
	names := claimNames(n)

	if b != nil {
		b.StartTimer()
	}
	before, kindsBefore := counter.n.Load(), counter.byKind()
	t0 := time.Now()
	var createdIn time.Duration
	created := make(chan error, 1)
	go func() {
		err := createClaims(ctx, driver, names)
		createdIn = time.Since(t0)
		created <- err
	}()
	err = rw.Wait(ctx, n, 2*time.Minute)
	elapsed := time.Since(t0)
	writes, kinds := counter.n.Load()-before, counter.byKind()
	if b != nil {
		b.StopTimer()
	}
	if err := errors.Join(<-created, err); err != nil {
		return result{}, err
	}
	for k, v := range kindsBefore {
		if kinds[k] -= v; kinds[k] == 0 {
			delete(kinds, k)
		}
	}
	if err := checkAddresses(ctx, driver, names); err != nil {
		return result{}, err
	}
	if rw.Relists() > 1 {
		tb.Logf("the API server ended the watch of the claims %d times; listed again each time", rw.Relists()-1)
	}
	return result{elapsed: elapsed, created: createdIn, writes: writes, kinds: kinds}, nil
}

// unthrottled is a client (with watch) without client-side rate limit.
func unthrottled(c *rest.Config, scheme *k8sruntime.Scheme) (client.WithWatch, error) {
	cfg := rest.CopyConfig(c)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "bench-driver"
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}

// startProvider runs the provider in a manager on a client whose writes
// counter counts; stop ends it and logs (never fails on) a shutdown
// error, and waits at most a minute for it.
func startProvider(tb testing.TB, c *rest.Config, scheme *k8sruntime.Scheme, counter *writeCounter) (stop func(), err error) {
	cfg := rest.CopyConfig(c)
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.UserAgent = "bench-contiv-capi-ipam"
	cfg.Wrap(counter.wrap)
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Logger: logr.Discard(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := pool.Setup(ctx, mgr, pool.Options{MaxConcurrentReconciles: workers, Log: slog.New(slog.DiscardHandler)}); err != nil {
		cancel()
		return nil, fmt.Errorf("pool.Setup: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Logf("manager shutdown (after the measurement, ignored): %v", err)
				}
			case <-time.After(time.Minute):
				tb.Logf("manager shutdown: still running a minute after the cancel (after the measurement, ignored)")
			}
		})
	}, nil
}

// createPool creates the namespace and the pool, and waits until the
// pool controller has written the pool's status.
func createPool(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	p := &v1alpha1.ContivIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: poolName},
		Spec: v1alpha1.ContivIPPoolSpec{Addresses: []string{poolCIDR}, Prefix: 21, Gateway: gateway}}
	if err := c.Create(ctx, p); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var got v1alpha1.ContivIPPool
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			return err
		}
		if got.Status.Addresses != nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the pool has no status a minute after its create: the provider does not run")
}

// writeCounter counts the requests that write, in all and by "VERB
// resource[/subresource]".
type writeCounter struct {
	n atomic.Int64

	mu    sync.Mutex
	kinds map[string]int64
}

func (c *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			c.n.Add(1)
			c.mu.Lock()
			if c.kinds == nil {
				c.kinds = map[string]int64{}
			}
			c.kinds[r.Method+" "+resourceOf(r.URL.Path)]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// byKind returns a copy of the counts by kind.
func (c *writeCounter) byKind() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.kinds)
}

// resourceOf is the resource[/subresource] of an API path
// (.../namespaces/ns/resource/name/subresource).
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	i := slices.Index(parts, "namespaces")
	switch {
	case i < 0 || len(parts) <= i+2:
		return path
	case len(parts) > i+4:
		return parts[i+2] + "/" + parts[i+4]
	}
	return parts[i+2]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// claimNames are claim-0000 ... for n claims.
func claimNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("claim-%04d", i)
	}
	return out
}

// createClaims creates the claims with creators clients at once; it
// returns the errors.
func createClaims(ctx context.Context, c client.Client, names []string) error {
	return kubebench.CreateAll(ctx, names, creators, func(ctx context.Context, name string) error {
		claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{
				APIGroup: v1alpha1.GroupVersion.Group, Kind: pool.KindPool, Name: poolName}}}
		if err := c.Create(ctx, claim); err != nil {
			return fmt.Errorf("create claim %s: %w", name, err)
		}
		return nil
	})
}

// ready tells whether the claim is Ready with an address.
func ready(c *ipamv1.IPAddressClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, ipamv1.IPAddressClaimReadyCondition)
	return cond != nil && cond.Status == metav1.ConditionTrue && c.Status.AddressRef.Name != ""
}

// readyWatch follows which claims are Ready with an address
// (kubebench.Follower).
func readyWatch(c client.WithWatch) *kubebench.Follower {
	return &kubebench.Follower{
		What: "claims Ready",
		List: func(ctx context.Context) ([]string, int, watch.Interface, error) {
			var list ipamv1.IPAddressClaimList
			if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
				return nil, 0, nil, err
			}
			var done []string
			for i := range list.Items {
				if ready(&list.Items[i]) {
					done = append(done, list.Items[i].Name)
				}
			}
			w, err := c.Watch(ctx, &ipamv1.IPAddressClaimList{}, client.InNamespace(namespace),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
			return done, len(list.Items), w, err
		},
		Reached: func(obj k8sruntime.Object) (string, bool, bool) {
			claim, ok := obj.(*ipamv1.IPAddressClaim)
			if !ok {
				return "", false, false
			}
			return claim.Name, ready(claim), true
		},
	}
}

// checkAddresses checks that every claim is Ready and holds the
// IPAddress its addressRef names, made for it, inside the pool, not the
// gateway, and that no address is handed out twice.
func checkAddresses(ctx context.Context, c client.Client, names []string) error {
	var claims ipamv1.IPAddressClaimList
	if err := c.List(ctx, &claims, client.InNamespace(namespace)); err != nil {
		return err
	}
	var addrs ipamv1.IPAddressList
	if err := c.List(ctx, &addrs, client.InNamespace(namespace)); err != nil {
		return err
	}
	if len(claims.Items) != len(names) || len(addrs.Items) != len(names) {
		return fmt.Errorf("%d claims and %d IPAddresses, want %d of each", len(claims.Items), len(addrs.Items), len(names))
	}
	block, gw := netip.MustParsePrefix(poolCIDR), netip.MustParseAddr(gateway)
	byName := make(map[string]ipamv1.IPAddress, len(addrs.Items))
	holder := make(map[netip.Addr]string, len(addrs.Items))
	var errs []error
	for _, ip := range addrs.Items {
		byName[ip.Name] = ip
		a, err := netip.ParseAddr(ip.Spec.Address)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("IPAddress %s: address %q: %w", ip.Name, ip.Spec.Address, err))
		case !block.Contains(a) || a == gw || a == block.Addr():
			errs = append(errs, fmt.Errorf("IPAddress %s: %s is not handed out by %s (gateway %s)", ip.Name, a, block, gw))
		case holder[a] != "":
			errs = append(errs, fmt.Errorf("%s handed out twice: to %s and %s", a, holder[a], ip.Spec.ClaimRef.Name))
		default:
			holder[a] = ip.Spec.ClaimRef.Name
		}
	}
	for i := range claims.Items {
		cl := &claims.Items[i]
		ip, ok := byName[cl.Status.AddressRef.Name]
		switch {
		case !ready(cl):
			errs = append(errs, fmt.Errorf("claim %s: not Ready", cl.Name))
		case !ok:
			errs = append(errs, fmt.Errorf("claim %s: its IPAddress %q does not exist", cl.Name, cl.Status.AddressRef.Name))
		case ip.Spec.ClaimRef.Name != cl.Name:
			errs = append(errs, fmt.Errorf("claim %s: its IPAddress %s is for claim %s", cl.Name, ip.Name, ip.Spec.ClaimRef.Name))
		}
	}
	return errors.Join(errs...)
}
