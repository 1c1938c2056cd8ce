package nodecidr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/contiv-ipam/agent/tests/bench/internal/kubebench"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The setup both implementations get.
const (
	clusterCIDR = "10.0.0.0/8"
	nodeMask    = 24
	clientQPS   = 1000
	clientBurst = 2000
	workers     = 30 // Kubernetes' cidrUpdateWorkers
	creators    = 16 // clients creating the Nodes at once
)

// impl is one allocator under test.
type impl struct {
	name string
	// prepare does, untimed, what the allocator's host has before it
	// starts the allocator; it returns the timed start and a counter of
	// the writes to the allocator's own ledger.
	prepare func(tb testing.TB) (start, func() int64)
}

// start builds the allocator on client, with a fresh shared informer
// factory, and runs it; stop ends it and waits for it.
type start func(ctx context.Context, client kubernetes.Interface) (stop func(), err error)

// result is one run's figures.
type result struct {
	elapsed     time.Duration
	writes      int64 // API writes of the allocator's client
	claimWrites int64 // writes to the allocator's own ledger
}

// runOnce runs one implementation on a fresh API server with n Nodes.
// The timer of b (nil in a test) runs only between the allocator's start
// and the moment every Node holds a CIDR.
func runOnce(tb testing.TB, b *testing.B, im impl, n int) (result, error) {
	ctx := tb.Context()
	kube, err := kubeenv.Start(tb.TempDir())
	if err != nil {
		return result{}, err
	}
	defer func() {
		if err := kube.Stop(); err != nil {
			tb.Logf("%s: %v", im.name, err)
		}
	}()
	fast, err := unthrottled(kube.Config)
	if err != nil {
		return result{}, err
	}
	if err := createNodes(ctx, fast, nodeNames(n), creators); err != nil {
		return result{}, err
	}
	cw := cidrWatch(fast)
	defer cw.Stop()
	listed, err := cw.Relist(ctx)
	if err != nil {
		return result{}, err
	}
	if listed != n || cw.Len() != 0 {
		return result{}, fmt.Errorf("%d Nodes listed, %d with CIDRs; want %d without", listed, cw.Len(), n)
	}

	run, claimWrites := im.prepare(tb)
	counter := &writeCounter{}
	cfg := rest.CopyConfig(kube.Config)
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.UserAgent = "bench-" + im.name
	cfg.Wrap(counter.wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return result{}, err
	}

	if b != nil {
		b.StartTimer()
	}
	t0 := time.Now()
	stop, err := run(ctx, client)
	if err != nil {
		return result{}, fmt.Errorf("%s: start: %w", im.name, err)
	}
	err = cw.Wait(ctx, n, 2*time.Minute)
	elapsed := time.Since(t0)
	if b != nil {
		b.StopTimer()
	}
	stop()
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", im.name, err)
	}
	if err := checkCIDRs(ctx, fast, n); err != nil {
		return result{}, fmt.Errorf("%s: %w", im.name, err)
	}
	if cw.Relists() > 1 {
		tb.Logf("%s: the API server ended the watch of the Nodes %d times; listed again each time", im.name, cw.Relists()-1)
	}
	return result{elapsed: elapsed, writes: counter.n.Load(), claimWrites: claimWrites()}, nil
}

// unthrottled is a clientset without client-side rate limit.
func unthrottled(c *rest.Config) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(c)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "bench-driver"
	return kubernetes.NewForConfig(cfg)
}

// writeCounter counts the requests that write.
type writeCounter struct{ n atomic.Int64 }

func (c *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			c.n.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// nodeNames are node-00000 ... for n Nodes.
func nodeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%05d", i)
	}
	return out
}

// createNodes creates the Nodes without pod CIDRs with workers clients at
// once; it returns the errors.
func createNodes(ctx context.Context, client kubernetes.Interface, names []string, workers int) error {
	return kubebench.CreateAll(ctx, names, workers, func(ctx context.Context, name string) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		return nil
	})
}

// cidrWatch follows which Nodes hold a pod CIDR (kubebench.Follower).
func cidrWatch(client kubernetes.Interface) *kubebench.Follower {
	return &kubebench.Follower{
		What: "Nodes with CIDRs",
		List: func(ctx context.Context) ([]string, int, watch.Interface, error) {
			list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, 0, nil, err
			}
			var have []string
			for i := range list.Items {
				if len(list.Items[i].Spec.PodCIDRs) > 0 {
					have = append(have, list.Items[i].Name)
				}
			}
			w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			return have, len(list.Items), w, err
		},
		Reached: func(obj runtime.Object) (string, bool, bool) {
			node, ok := obj.(*corev1.Node)
			if !ok {
				return "", false, false
			}
			return node.Name, len(node.Spec.PodCIDRs) > 0, true
		},
	}
}

// checkCIDRs lists the Nodes: there must be n, each holding one /24 of
// the cluster range in podCIDR and podCIDRs, no two the same.
func checkCIDRs(ctx context.Context, client kubernetes.Interface, n int) error {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(list.Items) != n {
		return fmt.Errorf("%d Nodes, want %d", len(list.Items), n)
	}
	cluster := netip.MustParsePrefix(clusterCIDR)
	holder := make(map[netip.Prefix]string, n)
	var errs []error
	for _, node := range list.Items {
		cidrs := node.Spec.PodCIDRs
		if len(cidrs) != 1 || node.Spec.PodCIDR != cidrs[0] {
			errs = append(errs, fmt.Errorf("node %s: podCIDR %q, podCIDRs %q: want one CIDR in both", node.Name, node.Spec.PodCIDR, cidrs))
			continue
		}
		p, err := netip.ParsePrefix(cidrs[0])
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("node %s: podCIDR %q: %w", node.Name, cidrs[0], err))
		case p.Bits() != nodeMask || p != p.Masked() || !cluster.Contains(p.Addr()):
			errs = append(errs, fmt.Errorf("node %s: podCIDR %s: want a /%d of %s", node.Name, p, nodeMask, cluster))
		case holder[p] != "":
			errs = append(errs, fmt.Errorf("podCIDR %s: held by %s and %s", p, holder[p], node.Name))
		default:
			holder[p] = node.Name
		}
	}
	return errors.Join(errs...)
}
