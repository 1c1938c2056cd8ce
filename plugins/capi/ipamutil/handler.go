package ipamutil

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// ClaimHandler serves one IPAddressClaim for one reconcile. The
// reconciler gets a fresh handler from ProviderAdapter.ClaimHandlerFor on
// every reconcile and calls FetchPool first; the handler keeps the pool it
// fetched for the calls that follow.
//
// A non-nil *ctrl.Result from any method stops the reconcile there and is
// returned to controller-runtime as it is (use it to wait, e.g. a reuse
// grace period); nothing after that step runs.
type ClaimHandler interface {
	// FetchPool reads the pool the claim's spec.poolRef names and keeps
	// it. A missing pool (a NotFound API error) or one wrapping
	// ErrPoolNotReady sets Ready False PoolNotReady; a nil pool with a nil
	// error counts as not ready. The returned object's TypeMeta may be
	// empty: the reconciler fills it from its Scheme.
	FetchPool(ctx context.Context) (client.Object, *ctrl.Result, error)
	// EnsureAddress fills address.Spec.Address, Prefix and Gateway and
	// makes sure the engine holds that address for the claim.
	//
	// The spec is empty for a new IPAddress. When the IPAddress exists
	// already, the spec holds its address: the handler must record that
	// address as the claim's (and give up any other it holds for the
	// claim) and must not change the spec — the reconciler refuses a
	// change. EnsureAddress must be idempotent per claim: until
	// ReleaseAddress, the same claim gets the same address, also when a
	// stale cache makes the reconciler call it again with an empty spec.
	// Return an error wrapping ErrPoolExhausted when no address is free.
	EnsureAddress(ctx context.Context, address *ipamv1.IPAddress) (*ctrl.Result, error)
	// ReleaseAddress gives the claim's address back to the pool. It runs
	// before the IPAddress is deleted and must succeed when nothing is
	// held: a retry, a pool FetchPool did not find, or a reconcile from a
	// cache that still shows a claim already gone (it happens).
	ReleaseAddress(ctx context.Context) (*ctrl.Result, error)
}

// ProviderAdapter is what a provider implements to plug its pools into
// ClaimReconciler.
type ProviderAdapter interface {
	// SetupWithManager extends the claim controller before it is built:
	// typically a watch on the provider's pool kinds mapped to their
	// claims with ClaimsForPool. It must not call For on the builder.
	SetupWithManager(context.Context, *ctrl.Builder) error
	// ClaimHandlerFor returns the handler for one reconcile of claim; c
	// is the reconciler's client.
	ClaimHandlerFor(c client.Client, claim *ipamv1.IPAddressClaim) ClaimHandler
}

// PoolMatcher is an optional capability of a ProviderAdapter: when the
// adapter implements it, the reconciler serves only the claims whose
// spec.poolRef it accepts, and never touches the others (no finalizer, no
// status, no IPAddress). An adapter without it is given every claim.
type PoolMatcher interface {
	// HandlesPool reports whether the adapter serves pools of ref's
	// apiGroup and kind.
	HandlesPool(ref ipamv1.IPPoolReference) bool
}
