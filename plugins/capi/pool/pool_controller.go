package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
)

// PoolReconciler keeps a pool's status (the engine's counts) and its
// finalizer: a pool that still has IPAddresses is not deleted.
type PoolReconciler struct {
	Client   client.Client
	Provider *Provider
	// Kind is KindPool or KindGlobalPool.
	Kind string
	// Versions are the served Cluster API versions: the IPAddresses are
	// watched at Versions.IPAM.
	Versions ipamutil.Versions
}

// newObject returns an empty pool object of the reconciler's kind.
func (r *PoolReconciler) newObject() client.Object {
	if r.Kind == KindGlobalPool {
		return &v1alpha1.GlobalContivIPPool{}
	}
	return &v1alpha1.ContivIPPool{}
}

// specOf returns the spec and the status of a pool object.
func specOf(obj client.Object) (v1alpha1.ContivIPPoolSpec, *v1alpha1.ContivIPPoolStatus) {
	switch p := obj.(type) {
	case *v1alpha1.ContivIPPool:
		return p.Spec, &p.Status
	case *v1alpha1.GlobalContivIPPool:
		return p.Spec, &p.Status
	}
	return v1alpha1.ContivIPPoolSpec{}, &v1alpha1.ContivIPPoolStatus{}
}

// SetupWithManager builds the controller: the pools of Kind, and the
// IPAddresses mapped to their pool.
func (r *PoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("contiv-"+strings.ToLower(r.Kind)).
		WithOptions(ipamutil.ControllerOptions(1)).
		For(r.newObject()).
		Watches(r.Versions.AddressObject(), handler.EnqueueRequestsFromMapFunc(r.addressToPool)).
		Complete(r)
}

// addressToPool maps an IPAddress to its pool of Kind.
func (r *PoolReconciler) addressToPool(ctx context.Context, obj client.Object) []reconcile.Request {
	ip, err := ipamutil.ToIPAddress(obj)
	if err != nil {
		log.FromContext(ctx).Error(err, "an IPAddress that does not convert is left out", "ipaddress", client.ObjectKeyFromObject(obj))
		return nil
	}
	if ip.Spec.PoolRef.APIGroup != v1alpha1.GroupVersion.Group || ip.Spec.PoolRef.Kind != r.Kind {
		return nil
	}
	key := types.NamespacedName{Name: ip.Spec.PoolRef.Name}
	if r.Kind == KindPool {
		key.Namespace = ip.Namespace
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// Reconcile sets the finalizer and the status, or lets a deleted pool go
// once it has no IPAddresses.
func (r *PoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.newObject()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	key := poolKey{kind: r.Kind, namespace: obj.GetNamespace(), name: obj.GetName(), uid: obj.GetUID()}
	if obj.GetDeletionTimestamp() != nil {
		return r.finish(ctx, obj, key)
	}
	if !controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		before := obj.DeepCopyObject().(client.Object)
		controllerutil.AddFinalizer(obj, v1alpha1.Finalizer)
		if err := r.Client.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("pool %s: add the finalizer: %w", key, err)
		}
	}
	return r.updateStatus(ctx, obj, key)
}

// updateStatus writes the engine's counts and the Ready condition; it
// comes back when the next address in its grace period frees up.
func (r *PoolReconciler) updateStatus(ctx context.Context, obj client.Object, key poolKey) (ctrl.Result, error) {
	now := r.Provider.now().Now()
	var counts Counts
	var next time.Time
	var pending bool
	spec, st := specOf(obj)
	err := r.Provider.withPool(ctx, key, obj.GetGeneration(), spec, func(pl *Pool) error {
		counts = pl.Counts(now)
		next, pending = pl.NextExpiry(now)
		return nil
	})
	if err != nil && !errors.Is(err, ipamutil.ErrPoolNotReady) {
		return ctrl.Result{}, err
	}
	before := obj.DeepCopyObject().(client.Object)
	_, beforeStatus := specOf(before)
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "PoolReady", Message: "the pool hands out addresses",
		ObservedGeneration: obj.GetGeneration()}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "InvalidSpec", err.Error()
		st.Addresses = nil
	} else {
		st.Addresses = &v1alpha1.PoolAddresses{Total: counts.Total, Used: counts.Used, Free: counts.Free, OutOfRange: counts.OutOfRange}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if !equality.Semantic.DeepEqual(beforeStatus, st) {
		if err := r.Client.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("pool %s: status: %w", key, err)
		}
	}
	if pending {
		return ctrl.Result{RequeueAfter: max(next.Sub(now), time.Millisecond)}, nil
	}
	return ctrl.Result{}, nil
}

// finish lets a deleted pool go when none of its IPAddresses is left. It
// reads them from the API server: the delete event of the last one may
// come before the cache drops it. While some are left it looks again
// after inUseRecheck (the deletes of the IPAddresses bring it back too).
func (r *PoolReconciler) finish(ctx context.Context, obj client.Object, key poolKey) (ctrl.Result, error) {
	left, err := r.Provider.addressesOf(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(left) > 0 {
		return ctrl.Result{RequeueAfter: inUseRecheck}, nil
	}
	if controllerutil.ContainsFinalizer(obj, v1alpha1.Finalizer) {
		before := obj.DeepCopyObject().(client.Object)
		controllerutil.RemoveFinalizer(obj, v1alpha1.Finalizer)
		if err := r.Client.Patch(ctx, obj, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("pool %s: remove the finalizer: %w", key, err)
		}
	}
	r.Provider.forget(key)
	return ctrl.Result{}, nil
}

// inUseRecheck is how often a deleted pool that still has IPAddresses is
// checked again.
const inUseRecheck = 5 * time.Second
