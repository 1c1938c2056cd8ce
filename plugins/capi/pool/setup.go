package pool

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
)

// Options configure the provider.
type Options struct {
	// WatchFilterValue limits the provider to the claims and Clusters
	// labelled cluster.x-k8s.io/watch-filter with it ("" serves all).
	WatchFilterValue string
	// MaxConcurrentReconciles is the number of claim workers (at least 1).
	// The engine, not the workers, makes the decisions, so any number is
	// safe.
	MaxConcurrentReconciles int
	// Clock is the time of the grace periods; nil means the real clock.
	Clock clock.PassiveClock
	// Log is the logger; nil means slog.Default().
	Log *slog.Logger
}

// NewScheme returns a scheme with the built-in types, the Cluster API
// types the provider reads (IPAddressClaim, IPAddress, Cluster) and the
// pools.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ipamv1.AddToScheme,
		clusterv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("pool: scheme: %w", err)
		}
	}
	return s, nil
}

// Setup adds the provider to mgr: the IPAddressClaim controller (ipamutil)
// serving the pools through one Provider, and a controller per pool kind
// for the pools' status and finalizer.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (*Provider, error) {
	p := &Provider{Reader: mgr.GetAPIReader(), Claims: mgr.GetClient(), Clock: o.Clock, Log: o.Log}
	claims := &ipamutil.ClaimReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), WatchFilterValue: o.WatchFilterValue,
		Adapter: p, MaxConcurrentReconciles: max(o.MaxConcurrentReconciles, 1)}
	if err := claims.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	for _, kind := range []string{KindPool, KindGlobalPool} {
		r := &PoolReconciler{Client: mgr.GetClient(), Provider: p, Kind: kind}
		if err := r.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("pool: %s controller: %w", kind, err)
		}
	}
	return p, nil
}
