package ipamutil

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// Field indexes on IPAddressClaims that SetupWithManager registers.
const (
	// PoolRefIndex indexes claims by PoolRefKey(spec.poolRef).
	PoolRefIndex = "ipamutil.spec.poolRef"
	// clusterIndex indexes claims by their cluster name.
	clusterIndex = "ipamutil.clusterName"
)

// PoolRefKey is the PoolRefIndex value of a pool reference:
// "apiGroup/kind/name".
func PoolRefKey(ref ipamv1.IPPoolReference) string {
	return ref.APIGroup + "/" + ref.Kind + "/" + ref.Name
}

// addIndexes registers the claim indexes on the served IPAddressClaim
// type: a client of NewClient lists the served type, so that is where the
// cache must index.
func addIndexes(ctx context.Context, mgr ctrl.Manager, v Versions) error {
	idx := mgr.GetFieldIndexer()
	err := idx.IndexField(ctx, v.ClaimObject(), PoolRefIndex, func(o client.Object) []string {
		if claim := claimOf(ctx, o); claim != nil {
			return []string{PoolRefKey(claim.Spec.PoolRef)}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ipamutil: index %s: %w", PoolRefIndex, err)
	}
	err = idx.IndexField(ctx, v.ClaimObject(), clusterIndex, func(o client.Object) []string {
		if claim := claimOf(ctx, o); claim != nil && clusterName(claim) != "" {
			return []string{clusterName(claim)}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ipamutil: index %s: %w", clusterIndex, err)
	}
	return nil
}

// claimOf is obj, an IPAddressClaim of a served version, as a v1beta2
// one; nil (logged) when it does not convert.
func claimOf(ctx context.Context, obj client.Object) *ipamv1.IPAddressClaim {
	claim, err := ToIPAddressClaim(obj)
	if err != nil {
		log.FromContext(ctx).Error(err, "an IPAddressClaim that does not convert is left out", "claim", client.ObjectKeyFromObject(obj))
		return nil
	}
	return claim
}

// ClaimsForPool maps a pool of kind gk to the claims that reference it:
// those in the pool's namespace, or in every namespace for a
// cluster-scoped pool. For an adapter's watch on its pools; it reads
// through c (the manager's cached client, through NewClient at the
// reconciler's Versions) with PoolRefIndex, which
// ClaimReconciler.SetupWithManager registers.
func ClaimsForPool(c client.Reader, gk schema.GroupKind) handler.MapFunc {
	return func(ctx context.Context, pool client.Object) []reconcile.Request {
		ref := ipamv1.IPPoolReference{APIGroup: gk.Group, Kind: gk.Kind, Name: pool.GetName()}
		claims, err := claimsOfPool(ctx, c, ref, pool.GetNamespace())
		if err != nil {
			log.FromContext(ctx).Error(err, "map a pool to its claims", "pool", ref)
		}
		reqs := make([]reconcile.Request, 0, len(claims))
		for i := range claims {
			reqs = append(reqs, requestFor(&claims[i]))
		}
		return reqs
	}
}

// claimsOfPool lists the claims of ref in namespace ("" for all).
func claimsOfPool(ctx context.Context, c client.Reader, ref ipamv1.IPPoolReference, namespace string) ([]ipamv1.IPAddressClaim, error) {
	list := &ipamv1.IPAddressClaimList{}
	opts := []client.ListOption{client.MatchingFields{PoolRefIndex: PoolRefKey(ref)}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("ipamutil: list the IPAddressClaims of pool %s: %w", PoolRefKey(ref), err)
	}
	return list.Items, nil
}

// addressToClaims maps a deleted IPAddress to its own claim (which
// recreates it if the claim lives on) and to the claims waiting on the
// same pool (step 6). Claims of a namespaced pool kind in other namespaces
// may be woken too (the ref does not tell the pool's scope); they find
// their pool still exhausted.
func (r *ClaimReconciler) addressToClaims(ctx context.Context, obj client.Object) []reconcile.Request {
	addr, err := ToIPAddress(obj)
	if err != nil {
		log.FromContext(ctx).Error(err, "a deleted IPAddress that does not convert is left out", "ipaddress", client.ObjectKeyFromObject(obj))
		return nil
	}
	reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: addr.Namespace, Name: addr.Spec.ClaimRef.Name}}}
	claims, err := claimsOfPool(ctx, r.versioned(), addr.Spec.PoolRef, "")
	if err != nil {
		log.FromContext(ctx).Error(err, "map a deleted IPAddress to the claims waiting on its pool", "ipaddress", client.ObjectKeyFromObject(addr))
	}
	for i := range claims {
		if c := &claims[i]; waiting(c) && r.selected(c) && c.Name != addr.Spec.ClaimRef.Name {
			reqs = append(reqs, requestFor(c))
		}
	}
	return reqs
}

// clusterToClaims maps a Cluster to the claims of its namespace that name
// it (step 2).
func (r *ClaimReconciler) clusterToClaims(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &ipamv1.IPAddressClaimList{}
	err := r.versioned().List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{clusterIndex: obj.GetName()})
	if err != nil {
		log.FromContext(ctx).Error(err, "map a Cluster to its claims", "cluster", client.ObjectKeyFromObject(obj))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if r.selected(&list.Items[i]) {
			reqs = append(reqs, requestFor(&list.Items[i]))
		}
	}
	return reqs
}

// selected reports whether the reconciler serves claim: the watch filter
// (step 5) and the adapter's PoolMatcher (step 1).
func (r *ClaimReconciler) selected(claim *ipamv1.IPAddressClaim) bool {
	if !r.filtered(claim) {
		return false
	}
	m, ok := r.Adapter.(PoolMatcher)
	return !ok || m.HandlesPool(claim.Spec.PoolRef)
}

// filtered applies WatchFilterValue to obj's labels.
func (r *ClaimReconciler) filtered(obj client.Object) bool {
	return r.WatchFilterValue == "" || obj.GetLabels()[clusterv1.WatchLabel] == r.WatchFilterValue
}

func (r *ClaimReconciler) claimPredicate() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		if !r.filtered(o) { // no conversion for the claims of others
			return false
		}
		claim := claimOf(context.Background(), o)
		return claim != nil && r.selected(claim)
	})
}

// unpausedPredicate passes Cluster updates that unpause it (and the
// watch filter).
func (r *ClaimReconciler) unpausedPredicate() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !r.filtered(e.ObjectNew) {
				return false
			}
			old, errOld := ToCluster(e.ObjectOld)
			cur, errNew := ToCluster(e.ObjectNew)
			return errOld == nil && errNew == nil && clusterPaused(old) && !clusterPaused(cur)
		},
	}
}

// deletedPredicate passes delete events only.
func deletedPredicate() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
	}
}

func requestFor(claim *ipamv1.IPAddressClaim) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}
}
