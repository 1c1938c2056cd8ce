package ipamutil_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
)

// NewIPAddress names the IPAddress like the claim, owns it by the claim
// (controller) and the pool, labels it with the claim's cluster and
// protects it with the finalizer.
func TestNewIPAddress(t *testing.T) {
	poolRef := ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "ContivIPPool", Name: "pool"}
	typedPool := &v1alpha1.ContivIPPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ContivIPPool"},
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: types.UID("pool-uid")},
	}
	bare := &v1alpha1.ContivIPPool{ObjectMeta: typedPool.ObjectMeta}
	claimOwner := metav1.OwnerReference{APIVersion: "ipam.cluster.x-k8s.io/v1beta2", Kind: "IPAddressClaim", Name: "claim",
		UID: "claim-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	poolOwner := metav1.OwnerReference{APIVersion: "ipam.contivpp.io/v1alpha1", Kind: "ContivIPPool", Name: "pool",
		UID: "pool-uid", BlockOwnerDeletion: ptr.To(true)}
	cases := []struct {
		name       string
		spec       string            // claim.spec.clusterName
		labels     map[string]string // claim's labels
		pool       *v1alpha1.ContivIPPool
		wantLabels map[string]string
		wantOwners []metav1.OwnerReference
	}{
		{"cluster from spec", "c1", map[string]string{clusterv1.ClusterNameLabel: "other"}, typedPool,
			map[string]string{clusterv1.ClusterNameLabel: "c1"}, []metav1.OwnerReference{claimOwner, poolOwner}},
		{"cluster from label", "", map[string]string{clusterv1.ClusterNameLabel: "c2"}, typedPool,
			map[string]string{clusterv1.ClusterNameLabel: "c2"}, []metav1.OwnerReference{claimOwner, poolOwner}},
		{"no cluster", "", nil, typedPool, nil, []metav1.OwnerReference{claimOwner, poolOwner}},
		{"pool without TypeMeta", "c1", nil, bare,
			map[string]string{clusterv1.ClusterNameLabel: "c1"}, []metav1.OwnerReference{claimOwner}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			claim := &ipamv1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns", UID: "claim-uid", Labels: tc.labels},
				Spec:       ipamv1.IPAddressClaimSpec{ClusterName: tc.spec, PoolRef: poolRef},
			}
			addr := ipamutil.NewIPAddress(claim, tc.pool)
			g.Expect(addr.Name).To(Equal("claim"))
			g.Expect(addr.Namespace).To(Equal("ns"))
			g.Expect(addr.Labels).To(Equal(tc.wantLabels))
			g.Expect(addr.OwnerReferences).To(Equal(tc.wantOwners))
			g.Expect(addr.Finalizers).To(ConsistOf(ipamutil.ProtectAddressFinalizer))
			g.Expect(addr.Spec).To(Equal(ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: "claim"}, PoolRef: poolRef}))
		})
	}
}
