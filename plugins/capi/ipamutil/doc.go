// Package ipamutil is the Cluster API IPAM framework our provider plugs
// into: ClaimReconciler owns the lifecycle every provider shares
// (finalizers, pausing, the IPAddress object, the claim's status, the
// watches), and a ProviderAdapter owns the pools and the addresses.
//
// # Versions
//
// Cluster API v1.11 and later serve ipam.cluster.x-k8s.io and
// cluster.x-k8s.io at v1beta2 (the storage version) and, converted by
// Cluster API's webhook, at v1beta1; older ones serve v1beta1 only.
// DiscoverVersions picks per group v1beta2 when served (with the
// resources the reconciler uses), else v1beta1, and ClaimReconciler's
// Versions says which. Whatever they are, the reconciler, the handlers
// and every client of NewClient or NewReader work with the v1beta2 Go
// types: the watches, indexes and requests are at the served version,
// and objects are converted on the way in and out with Cluster API's
// own conversion functions (its v1beta1 packages). Merge patches are
// computed between the two converted objects (MergeFrom), since the
// shapes differ. The Ready condition is also written in its deprecated
// v1beta1 form (status.deprecated.v1beta1.conditions, which a v1beta1
// reader sees as status.conditions): True, or False with the reason and
// severity Warning (PoolNotReady, PoolExhausted) or Error
// (AllocationFailed). The claim's owner reference on its IPAddress names
// the served version. VersionWatch ends the manager when the versions
// discovery picks change (an upgrade), so that a restart talks the new
// ones.
//
// # What Reconcile does
//
// For one IPAddressClaim (ipam.cluster.x-k8s.io, v1beta2 in memory), in
// this order:
//
//  1. Get the claim; a gone claim is done. Skip a claim the reconciler
//     does not serve: its clusterv1.WatchLabel differs from
//     WatchFilterValue (step 5), or the adapter implements PoolMatcher
//     and refuses the claim's spec.poolRef. A skipped claim is never
//     written to, so two providers can share a cluster. The same test
//     filters the watch events, so skipped claims cost no reconcile.
//  2. Skip a paused claim without any write: the claim carries
//     clusterv1.PausedAnnotation, or its Cluster (spec.clusterName, else
//     the clusterv1.ClusterNameLabel label; in the claim's namespace) has
//     spec.paused true or that annotation. A missing Cluster is not
//     paused. Pausing holds deletion too. When a Cluster goes from paused
//     to not paused, its claims are reconciled again.
//  3. A claim being deleted (deletionTimestamp set) that holds
//     ReleaseAddressFinalizer, in this order: (a) handler.FetchPool, where
//     a missing or not ready pool does not stop the deletion
//     (ReleaseAddress must cope) and another error is retried; (b) handler.ReleaseAddress, where a
//     Result stops the reconcile with everything kept and is returned (a
//     grace period requeues) and an error is retried; (c) remove
//     ProtectAddressFinalizer from the claim's IPAddress (one whose
//     spec.claimRef names the claim), then delete that IPAddress; (d)
//     last, remove ReleaseAddressFinalizer from the claim. A failure
//     returns before the next step, so a retry resumes where it stopped.
//  4. Otherwise, in this order: (a) add ReleaseAddressFinalizer to the
//     claim; (b) handler.FetchPool, where a NotFound error, an error
//     wrapping ErrPoolNotReady or a nil pool sets Ready False
//     PoolNotReady; (c) the IPAddress named like the claim: when missing,
//     NewIPAddress, handler.EnsureAddress fills address, prefix and
//     gateway, and it is created (never overwritten; AlreadyExists, a
//     cache behind the API server, is retried without a status change);
//     when present (and
//     of this claim and pool), handler.EnsureAddress sees its spec, which
//     must come back unchanged (an IPAddress's spec is immutable), and
//     only missing owner references, label or finalizer are patched in;
//     (d) status.addressRef names the IPAddress and Ready is True (reason
//     Ready).
//     An error sets Ready False with the reason of the sentinel it wraps:
//     ErrPoolExhausted gives PoolExhausted, ErrPoolNotReady PoolNotReady,
//     anything else AllocationFailed. PoolExhausted and PoolNotReady wait
//     for an event (no backoff retry); AllocationFailed is returned as an
//     error and retried with backoff. A Result from the handler is
//     returned as it is, with no status change.
//  5. WatchFilterValue, when not empty, limits the reconciler to claims
//     and Clusters labelled clusterv1.WatchLabel=WatchFilterValue.
//  6. When an IPAddress is deleted, its claim is reconciled (a live claim
//     gets it back) and so are the claims of the same spec.poolRef whose
//     Ready is False with PoolExhausted: they are found through the
//     PoolRefIndex field index on claims, not by listing all claims.
//  7. Writes: the claim's status and every finalizer change are merge
//     patches carrying the object's resourceVersion (optimistic lock):
//     a concurrent change fails the patch with a conflict rather than
//     being lost (a merge patch replaces whole lists, such as conditions
//     and finalizers). A conflict on the claim ends the reconcile without
//     an error: the newer claim's watch event runs it again. A conflict on
//     the IPAddress is returned and retried. Conditions are set
//     with meta.SetStatusCondition, so lastTransitionTime moves only when
//     the status does. The status is written only when it changed.
//
// # Caller duties
//
//  1. Register ipamv1 (sigs.k8s.io/cluster-api/api/ipam/v1beta2),
//     clusterv1 (.../core/v1beta2), their v1beta1 packages when a group
//     is served at v1beta1, and the pool types in the Scheme of the
//     manager and of ClaimReconciler. The cluster must serve the Cluster
//     CRD: the reconciler watches Clusters. Set Versions from
//     DiscoverVersions (the zero value is v1beta2), and run a
//     VersionWatch beside the manager.
//  2. Call ClaimReconciler.SetupWithManager before the manager starts; it
//     registers the field indexes, then calls Adapter.SetupWithManager
//     with the builder (which must not call For), then builds the
//     controller (named "ipaddressclaim").
//  3. The adapter watches its pool kinds and maps a pool to its claims,
//     e.g. Watches(&Pool{}, handler.EnqueueRequestsFromMapFunc(
//     ClaimsForPool(NewReader(mgr.GetClient(), versions), poolGroupKind))).
//     Nothing else wakes a claim waiting with PoolNotReady. Every other
//     read of claims or IPAddresses by the adapter goes through NewClient
//     or NewReader at the same Versions (the client handed to
//     ClaimHandlerFor is one), and watches on them use
//     Versions.AddressObject and ToIPAddress.
//  4. A handler returns errors wrapping ErrPoolExhausted and
//     ErrPoolNotReady for those conditions; other errors are retried.
//  5. EnsureAddress is idempotent per claim, and the source of truth for
//     which addresses are taken is the provider's engine (or a live
//     read), not the manager's cache: the cache may not show an IPAddress
//     created a moment ago, and the reconciler may call EnsureAddress with
//     an empty spec for a claim whose IPAddress exists (the create then
//     fails with AlreadyExists and the reconcile retries).
//  6. ReleaseAddress is idempotent and succeeds when nothing is held.
//  7. With MaxConcurrentReconciles above 1 (default 1) the handlers of
//     different claims run concurrently; a claim is never reconciled by
//     two workers at once.
//  8. RBAC: get/list/watch/patch on ipaddressclaims and their status;
//     get/list/watch/create/patch/delete on ipaddresses; get/list/watch
//     on clusters; and update on ipaddressclaims/finalizers and on the
//     pools' finalizers subresource, because the IPAddress's owner
//     references set blockOwnerDeletion.
package ipamutil
