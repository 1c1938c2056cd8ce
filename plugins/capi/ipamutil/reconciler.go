package ipamutil

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// ClaimReconciler reconciles IPAddressClaims through a ProviderAdapter:
// finalizers, pausing, the IPAddress object and the claim's status are
// its part; allocating and releasing addresses is the adapter's. See the
// package documentation for the steps and the caller's duties.
type ClaimReconciler struct {
	client.Client
	// Scheme knows ipamv1, clusterv1 and the provider's pool types.
	Scheme *runtime.Scheme
	// WatchFilterValue, when set, limits the reconciler to claims (and
	// Clusters) whose clusterv1.WatchLabel equals it.
	WatchFilterValue string
	// Adapter is the provider.
	Adapter ProviderAdapter
	// MaxConcurrentReconciles is the number of workers; 0 means 1. More
	// than one needs a handler safe for concurrent use (different claims).
	MaxConcurrentReconciles int
	// Versions are the served versions of the Cluster API groups to talk
	// (DiscoverVersions); the zero value is v1beta2. Client is wrapped
	// with NewClient at these versions, and the handlers get that client.
	Versions Versions
}

// versioned is the reconciler's Client at its Versions.
func (r *ClaimReconciler) versioned() client.Client {
	return NewClient(r.Client, r.Versions)
}

// ControllerOptions are the options of every controller of the provider:
// workers reconcilers, on client-go's rate-limited work queue rather than
// controller-runtime's priority queue. The priority queue of the pinned
// controller-runtime (v0.24.1) can deadlock at shutdown: a worker that
// leaves Get when the queue shuts down is still counted as waiting, the
// queue's handler then blocks handing it an item while holding the lock
// that Done needs, and the manager's stop runs into its 30 s timeout
// (kubernetes-sigs/controller-runtime#3538, fixed in v0.25, which needs
// Kubernetes 0.37 libraries). Seen in our provider's tests under load.
func ControllerOptions(workers int) controller.Options {
	off := false
	return controller.Options{MaxConcurrentReconciles: workers, UsePriorityQueue: &off}
}

// SetupWithManager registers the claim indexes and the controller on mgr.
func (r *ClaimReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Client == nil || r.Scheme == nil || r.Adapter == nil {
		return errors.New("ipamutil: ClaimReconciler needs Client, Scheme and Adapter")
	}
	if err := r.Versions.Validate(); err != nil {
		return err
	}
	if err := addIndexes(ctx, mgr, r.Versions); err != nil {
		return err
	}
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 1
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(r.Versions.ClaimObject(), builder.WithPredicates(r.claimPredicate())).
		WithOptions(ControllerOptions(workers)).
		Watches(r.Versions.ClusterObject(), handler.EnqueueRequestsFromMapFunc(r.clusterToClaims),
			builder.WithPredicates(r.unpausedPredicate())).
		Watches(r.Versions.AddressObject(), handler.EnqueueRequestsFromMapFunc(r.addressToClaims),
			builder.WithPredicates(deletedPredicate()))
	if err := r.Adapter.SetupWithManager(ctx, b); err != nil {
		return fmt.Errorf("ipamutil: adapter setup: %w", err)
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("ipamutil: build the IPAddressClaim controller: %w", err)
	}
	return nil
}

// Reconcile runs the steps of the package documentation for one claim.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := r.versioned()
	claim := &ipamv1.IPAddressClaim{}
	if err := c.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("ipamutil: get IPAddressClaim %s: %w", req.NamespacedName, err)
	}
	if !r.selected(claim) {
		return ctrl.Result{}, nil
	}
	paused, err := r.paused(ctx, c, claim)
	if err != nil || paused {
		return ctrl.Result{}, err
	}
	h := r.Adapter.ClaimHandlerFor(c, claim)
	if !claim.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, c, claim, h)
	}
	return r.reconcileNormal(ctx, c, claim, h)
}

// reconcileNormal is step 4: finalizer, pool, IPAddress, status.
func (r *ClaimReconciler) reconcileNormal(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim, h ClaimHandler) (ctrl.Result, error) {
	if before := claim.DeepCopy(); controllerutil.AddFinalizer(claim, ReleaseAddressFinalizer) {
		if err := patchMeta(ctx, c, before, claim); err != nil {
			return ctrl.Result{}, dropConflict(err)
		}
	}
	before := claim.DeepCopy()
	addr, res, err := r.allocate(ctx, c, claim, h)
	switch {
	case res != nil && err == nil:
		return *res, nil
	case apierrors.IsAlreadyExists(err):
		// The cache has not seen the IPAddress yet: retry, no status flap.
		return ctrl.Result{}, err
	}
	if err != nil {
		setNotReady(claim, err)
	} else {
		setAddressReady(claim, addr)
	}
	if err = retryable(err); err != nil {
		ref := claim.Spec.PoolRef
		err = fmt.Errorf("ipamutil: IPAddressClaim %s/%s of %s %q: %w", claim.Namespace, claim.Name, ref.Kind, ref.Name, err)
	}
	if perr := patchStatus(ctx, c, before, claim); perr != nil {
		return ctrl.Result{}, errors.Join(dropConflict(perr), err)
	}
	return ctrl.Result{}, err
}

// allocate fetches the pool and creates or adopts the IPAddress.
func (r *ClaimReconciler) allocate(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim, h ClaimHandler) (*ipamv1.IPAddress, *ctrl.Result, error) {
	pool, res, err := r.fetchPool(ctx, claim, h)
	if err != nil || res != nil {
		return nil, res, err
	}
	return ensureIPAddress(ctx, c, r.Versions, claim, pool, h)
}

// fetchPool calls the handler and gives the pool its TypeMeta; a missing
// pool wraps ErrPoolNotReady.
func (r *ClaimReconciler) fetchPool(ctx context.Context, claim *ipamv1.IPAddressClaim, h ClaimHandler) (client.Object, *ctrl.Result, error) {
	ref := claim.Spec.PoolRef
	pool, res, err := h.FetchPool(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, fmt.Errorf("%w: %s %q: %w", ErrPoolNotReady, ref.Kind, ref.Name, err)
	case err != nil || res != nil:
		return nil, res, err
	case pool == nil:
		return nil, nil, fmt.Errorf("%w: %s %q not found", ErrPoolNotReady, ref.Kind, ref.Name)
	}
	if pool.GetObjectKind().GroupVersionKind().Kind == "" {
		gvk, err := apiutil.GVKForObject(pool, r.Scheme)
		if err != nil {
			return nil, nil, fmt.Errorf("ipamutil: pool %s %q: %w", ref.Kind, ref.Name, err)
		}
		pool.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return pool, nil, nil
}

// retryable is the error Reconcile returns for a failed allocation: nil
// for the waits (PoolExhausted, PoolNotReady), which events end, and err
// (retry with backoff) otherwise.
func retryable(err error) error {
	if err == nil || errors.Is(err, ErrPoolExhausted) || errors.Is(err, ErrPoolNotReady) {
		return nil
	}
	return err
}

// reconcileDelete is step 3: release, then the IPAddress's finalizer, the
// IPAddress, and the claim's finalizer last.
func (r *ClaimReconciler) reconcileDelete(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim, h ClaimHandler) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(claim, ReleaseAddressFinalizer) {
		return ctrl.Result{}, nil
	}
	if _, res, err := r.fetchPool(ctx, claim, h); res != nil || (err != nil && !errors.Is(err, ErrPoolNotReady)) {
		return orEmpty(res), err
	}
	if res, err := h.ReleaseAddress(ctx); err != nil || res != nil {
		if err != nil {
			err = fmt.Errorf("ipamutil: release the address of IPAddressClaim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		return orEmpty(res), err
	}
	if err := deleteIPAddress(ctx, c, claim); err != nil {
		return ctrl.Result{}, err
	}
	before := claim.DeepCopy()
	controllerutil.RemoveFinalizer(claim, ReleaseAddressFinalizer)
	return ctrl.Result{}, dropConflict(patchMeta(ctx, c, before, claim))
}

// dropConflict drops a conflict of a write to the claim: the reconcile
// read an older claim than the API server holds, and the newer claim's
// watch event reconciles it again, so a retry with backoff (and an error
// log) would only repeat that.
func dropConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// paused is step 2: the claim's paused annotation, or its Cluster's
// spec.paused or paused annotation. A missing Cluster is not paused.
func (r *ClaimReconciler) paused(ctx context.Context, c client.Reader, claim *ipamv1.IPAddressClaim) (bool, error) {
	if _, ok := claim.Annotations[clusterv1.PausedAnnotation]; ok {
		return true, nil
	}
	name := clusterName(claim)
	if name == "" {
		return false, nil
	}
	cluster := &clusterv1.Cluster{}
	key := types.NamespacedName{Namespace: claim.Namespace, Name: name}
	if err := c.Get(ctx, key, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("ipamutil: get Cluster %s of IPAddressClaim %s: %w", key, claim.Name, err)
	}
	return clusterPaused(cluster), nil
}

func clusterPaused(c *clusterv1.Cluster) bool {
	_, annotated := c.Annotations[clusterv1.PausedAnnotation]
	return annotated || (c.Spec.Paused != nil && *c.Spec.Paused)
}

func orEmpty(res *ctrl.Result) ctrl.Result {
	if res == nil {
		return ctrl.Result{}
	}
	return *res
}
