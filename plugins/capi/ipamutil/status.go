//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package ipamutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// Sentinel errors a ClaimHandler wraps so that the reconciler picks the
// reason of the claim's Ready condition. Any other error gives
// AllocationFailed.
var (
	// ErrPoolExhausted: the pool has no free address. Reason
	// PoolExhausted; the claim waits (no retry with backoff) and is
	// reconciled again when an IPAddress of the same pool is deleted.
	ErrPoolExhausted = errors.New("ipamutil: pool exhausted")
	// ErrPoolNotReady: the pool exists but cannot serve yet (or is
	// missing). Reason PoolNotReady; the claim waits for a pool event
	// (the adapter's watch, duty 3 in doc.go).
	ErrPoolNotReady = errors.New("ipamutil: pool not ready")
)

// reasonFor maps an error of a handler to the Ready reason.
func reasonFor(err error) string {
	switch {
	case errors.Is(err, ErrPoolExhausted):
		return ipamv1.IPAddressClaimReadyPoolExhaustedReason
	case errors.Is(err, ErrPoolNotReady):
		return ipamv1.IPAddressClaimReadyPoolNotReadyReason
	default:
		return ipamv1.IPAddressClaimReadyAllocationFailedReason
	}
}

// setReady sets the claim's Ready condition in memory, and its
// deprecated v1beta1 twin (status.deprecated.v1beta1.conditions), which
// is status.conditions of the claim read at v1beta1: the conditions of
// the field's providers and of the older Cluster APIs.
func setReady(claim *ipamv1.IPAddressClaim, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{
		Type:               ipamv1.IPAddressClaimReadyCondition,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: claim.Generation,
	})
	setV1Beta1Ready(claim, status, reason, message)
}

// setV1Beta1Ready sets the deprecated v1beta1 Ready condition the way
// Cluster API's v1beta1 conditions read: True without a reason; False
// with the reason, the message and a severity (Warning for the waits,
// Error for AllocationFailed). lastTransitionTime moves only when the
// status does.
func setV1Beta1Ready(claim *ipamv1.IPAddressClaim, status metav1.ConditionStatus, reason, message string) {
	c := clusterv1.Condition{Type: clusterv1.ReadyV1Beta1Condition, Status: corev1.ConditionStatus(status)}
	if status == metav1.ConditionFalse {
		c.Reason, c.Message, c.Severity = reason, message, clusterv1.ConditionSeverityWarning
		if reason == ipamv1.AllocationFailedV1Beta1Reason {
			c.Severity = clusterv1.ConditionSeverityError
		}
	}
	if claim.Status.Deprecated == nil {
		claim.Status.Deprecated = &ipamv1.IPAddressClaimDeprecatedStatus{}
	}
	if claim.Status.Deprecated.V1Beta1 == nil {
		claim.Status.Deprecated.V1Beta1 = &ipamv1.IPAddressClaimV1Beta1DeprecatedStatus{}
	}
	conds := &claim.Status.Deprecated.V1Beta1.Conditions
	for i := range *conds {
		if old := &(*conds)[i]; old.Type == c.Type {
			c.LastTransitionTime = old.LastTransitionTime
			if old.Status != c.Status {
				c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
			}
			*old = c
			return
		}
	}
	c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
	*conds = append(*conds, c)
}

// setNotReady sets Ready False with the reason of err.
func setNotReady(claim *ipamv1.IPAddressClaim, err error) {
	setReady(claim, metav1.ConditionFalse, reasonFor(err), err.Error())
}

// setAddressReady records the IPAddress and sets Ready True.
func setAddressReady(claim *ipamv1.IPAddressClaim, address *ipamv1.IPAddress) {
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: address.Name}
	setReady(claim, metav1.ConditionTrue, clusterv1.ReadyReason,
		fmt.Sprintf("IPAddress %s holds %s/%d", address.Name, address.Spec.Address, derefPrefix(address.Spec.Prefix)))
}

// waiting reports whether the claim waits on an exhausted pool.
func waiting(claim *ipamv1.IPAddressClaim) bool {
	c := meta.FindStatusCondition(claim.Status.Conditions, ipamv1.IPAddressClaimReadyCondition)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == ipamv1.IPAddressClaimReadyPoolExhaustedReason
}

// patchStatus writes the claim's status when it differs from before's. The
// merge patch carries before's resourceVersion: a concurrent writer makes
// it fail with a conflict (and the reconcile retries) instead of being
// overwritten, since a merge patch replaces the whole conditions list.
func patchStatus(ctx context.Context, c client.Client, before, claim *ipamv1.IPAddressClaim) error {
	if equality.Semantic.DeepEqual(before.Status, claim.Status) {
		return nil
	}
	patch := MergeFrom(before, client.MergeFromWithOptimisticLock{})
	if err := c.Status().Patch(ctx, claim, patch); err != nil {
		return fmt.Errorf("ipamutil: patch status of IPAddressClaim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

func derefPrefix(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
