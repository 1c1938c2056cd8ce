package ipamutil

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// Finalizers of the Cluster API IPAM contract.
const (
	// ReleaseAddressFinalizer sits on a claim until its address is
	// released and its IPAddress deleted.
	ReleaseAddressFinalizer = "ipam.cluster.x-k8s.io/ReleaseAddress"
	// ProtectAddressFinalizer sits on an IPAddress until its claim is
	// being deleted, so that the IPAddress cannot go while in use.
	ProtectAddressFinalizer = "ipam.cluster.x-k8s.io/ProtectAddress"
)

// NewIPAddress returns the IPAddress for claim from pool, without an
// address: named like the claim in its namespace, owned by the claim (the
// controller) and by the pool, labelled with the claim's cluster name
// (spec.clusterName, else the claim's cluster-name label; no label when
// both are empty), with the ProtectAddress finalizer, spec.claimRef and
// spec.poolRef (copied from the claim's spec.poolRef, which the CAPI
// webhook requires).
//
// The pool's owner reference uses the pool's TypeMeta; a pool with an
// empty Kind gets none (ClaimReconciler fills the TypeMeta from its Scheme
// before calling this).
func NewIPAddress(claim *ipamv1.IPAddressClaim, pool client.Object) ipamv1.IPAddress {
	owners := []metav1.OwnerReference{{
		APIVersion:         ipamv1.GroupVersion.String(),
		Kind:               "IPAddressClaim",
		Name:               claim.Name,
		UID:                claim.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}
	if gvk := pool.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		owners = append(owners, metav1.OwnerReference{
			APIVersion:         gvk.GroupVersion().String(),
			Kind:               gvk.Kind,
			Name:               pool.GetName(),
			UID:                pool.GetUID(),
			BlockOwnerDeletion: ptr.To(true),
		})
	}
	var labels map[string]string
	if name := clusterName(claim); name != "" {
		labels = map[string]string{clusterv1.ClusterNameLabel: name}
	}
	return ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:            claim.Name,
			Namespace:       claim.Namespace,
			Labels:          labels,
			OwnerReferences: owners,
			Finalizers:      []string{ProtectAddressFinalizer},
		},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  claim.Spec.PoolRef,
		},
	}
}

// clusterName is the claim's cluster: spec.clusterName, else its
// cluster-name label.
func clusterName(claim *ipamv1.IPAddressClaim) string {
	if claim.Spec.ClusterName != "" {
		return claim.Spec.ClusterName
	}
	return claim.Labels[clusterv1.ClusterNameLabel]
}

// ensureIPAddress creates the claim's IPAddress, or brings the metadata of
// the existing one in line with NewIPAddress; the spec of an existing
// IPAddress is never changed.
//
// The claim's owner reference names the claim at the served version v
// (NewIPAddress's is v1beta2): the garbage collector resolves it.
func ensureIPAddress(ctx context.Context, c client.Client, v Versions, claim *ipamv1.IPAddressClaim, pool client.Object, h ClaimHandler) (*ipamv1.IPAddress, *ctrl.Result, error) {
	want := NewIPAddress(claim, pool)
	want.OwnerReferences[0].APIVersion = IPAMGroup + "/" + v.normal().IPAM
	existing := &ipamv1.IPAddress{}
	err := c.Get(ctx, client.ObjectKeyFromObject(&want), existing)
	switch {
	case apierrors.IsNotFound(err):
		return createIPAddress(ctx, c, &want, h)
	case err != nil:
		return nil, nil, fmt.Errorf("ipamutil: get IPAddress %s/%s: %w", want.Namespace, want.Name, err)
	}
	if existing.Spec.ClaimRef.Name != claim.Name || existing.Spec.PoolRef != claim.Spec.PoolRef {
		return nil, nil, fmt.Errorf("ipamutil: IPAddress %s/%s belongs to claim %q of pool %s %q, not to this claim of pool %s %q",
			existing.Namespace, existing.Name, existing.Spec.ClaimRef.Name, existing.Spec.PoolRef.Kind, existing.Spec.PoolRef.Name,
			claim.Spec.PoolRef.Kind, claim.Spec.PoolRef.Name)
	}
	spec := existing.Spec.DeepCopy()
	if res, err := h.EnsureAddress(ctx, existing); err != nil || res != nil {
		return nil, res, err
	}
	if !equality.Semantic.DeepEqual(*spec, existing.Spec) {
		return nil, nil, fmt.Errorf("ipamutil: handler changed the address of IPAddress %s/%s from %s/%d to %s/%d; an IPAddress's spec is immutable",
			existing.Namespace, existing.Name, spec.Address, derefPrefix(spec.Prefix), existing.Spec.Address, derefPrefix(existing.Spec.Prefix))
	}
	return existing, nil, adoptMetadata(ctx, c, existing, &want)
}

// createIPAddress lets the handler fill want's spec and creates it.
func createIPAddress(ctx context.Context, c client.Client, want *ipamv1.IPAddress, h ClaimHandler) (*ipamv1.IPAddress, *ctrl.Result, error) {
	if res, err := h.EnsureAddress(ctx, want); err != nil || res != nil {
		return nil, res, err
	}
	if want.Spec.Address == "" || want.Spec.Prefix == nil {
		return nil, nil, fmt.Errorf("ipamutil: handler left IPAddress %s/%s without an address or prefix (address %q)",
			want.Namespace, want.Name, want.Spec.Address)
	}
	if err := c.Create(ctx, want); err != nil {
		return nil, nil, fmt.Errorf("ipamutil: create IPAddress %s/%s for %s: %w", want.Namespace, want.Name, want.Spec.Address, err)
	}
	return want, nil, nil
}

// adoptMetadata adds want's owner references, cluster label and finalizer
// to existing when one is missing.
func adoptMetadata(ctx context.Context, c client.Client, existing, want *ipamv1.IPAddress) error {
	before := existing.DeepCopy()
	for _, ref := range want.OwnerReferences {
		upsertOwner(existing, ref)
	}
	for k, v := range want.Labels {
		if existing.Labels == nil {
			existing.Labels = map[string]string{}
		}
		existing.Labels[k] = v
	}
	controllerutil.AddFinalizer(existing, ProtectAddressFinalizer)
	if equality.Semantic.DeepEqual(before.ObjectMeta, existing.ObjectMeta) {
		return nil
	}
	return patchMeta(ctx, c, before, existing)
}

// upsertOwner sets ref on obj, replacing a reference with the same UID.
func upsertOwner(obj *ipamv1.IPAddress, ref metav1.OwnerReference) {
	for i, r := range obj.OwnerReferences {
		if r.UID == ref.UID {
			obj.OwnerReferences[i] = ref
			return
		}
	}
	obj.OwnerReferences = append(obj.OwnerReferences, ref)
}

// patchMeta writes obj's metadata changes against before, failing on a
// concurrent change (a merge patch replaces whole lists such as
// finalizers). A gone object is not an error.
func patchMeta(ctx context.Context, c client.Client, before, obj client.Object) error {
	patch := MergeFrom(before, client.MergeFromWithOptimisticLock{})
	if err := c.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("ipamutil: patch metadata of %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// deleteIPAddress removes the ProtectAddress finalizer from the claim's
// IPAddress, then deletes it. An IPAddress of another claim is left alone.
func deleteIPAddress(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim) error {
	addr := &ipamv1.IPAddress{}
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	if err := c.Get(ctx, key, addr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("ipamutil: get IPAddress %s: %w", key, err)
	}
	if addr.Spec.ClaimRef.Name != claim.Name {
		return nil
	}
	before := addr.DeepCopy()
	if controllerutil.RemoveFinalizer(addr, ProtectAddressFinalizer) {
		if err := patchMeta(ctx, c, before, addr); err != nil {
			return err
		}
	}
	if !addr.DeletionTimestamp.IsZero() {
		return nil
	}
	pre := client.Preconditions{UID: &addr.UID}
	if err := c.Delete(ctx, addr, pre); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("ipamutil: delete IPAddress %s: %w", key, err)
	}
	return nil
}
