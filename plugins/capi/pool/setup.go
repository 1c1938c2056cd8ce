//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package pool

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
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
	// Versions are the served Cluster API versions to talk
	// (ipamutil.DiscoverVersions); the zero value is v1beta2.
	Versions ipamutil.Versions
}

// NewScheme returns a scheme with the built-in types, the Cluster API
// types the provider reads (IPAddressClaim, IPAddress, Cluster) at
// v1beta2 and v1beta1, and the pools.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, ipamv1.AddToScheme, ipamv1beta1.AddToScheme,
		clusterv1.AddToScheme, clusterv1beta1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("pool: scheme: %w", err)
		}
	}
	return s, nil
}

// Setup adds the provider to mgr: the IPAddressClaim controller (ipamutil)
// serving the pools through one Provider, and a controller per pool kind
// for the pools' status and finalizer, all talking o.Versions.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) (*Provider, error) {
	if err := o.Versions.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{Reader: ipamutil.NewReader(mgr.GetAPIReader(), o.Versions), Claims: ipamutil.NewReader(mgr.GetClient(), o.Versions),
		Clock: o.Clock, Log: o.Log}
	claims := &ipamutil.ClaimReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), WatchFilterValue: o.WatchFilterValue,
		Adapter: p, MaxConcurrentReconciles: max(o.MaxConcurrentReconciles, 1), Versions: o.Versions}
	if err := claims.SetupWithManager(ctx, mgr); err != nil {
		return nil, err
	}
	for _, kind := range []string{KindPool, KindGlobalPool} {
		r := &PoolReconciler{Client: mgr.GetClient(), Provider: p, Kind: kind, Versions: o.Versions}
		if err := r.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("pool: %s controller: %w", kind, err)
		}
	}
	return p, nil
}
