package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Allocation strategies of a pool.
const (
	// LowestFree hands out the lowest free address (the Cluster API
	// in-cluster provider's behaviour): addresses are reused as soon as
	// their grace period is over.
	LowestFree = "LowestFree"
	// NextFit hands out the first free address after the last one handed
	// out, wrapping around: a released address is reused last.
	NextFit = "NextFit"
)

// Finalizer keeps a pool that still has addresses allocated from being
// deleted.
const Finalizer = "ipam.contivpp.io/ProtectPool"

// ContivIPPoolSpec is the addresses a pool hands out.
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || size(self.gateway) == 0 || isIP(self.gateway)",message="gateway must be an IP address"
type ContivIPPoolSpec struct {
	// Addresses are the addresses of the pool: single IPs ("10.0.0.5"),
	// ranges ("10.0.0.10-10.0.0.20") and CIDRs ("10.0.1.0/24"), of one
	// family, in any order; they may be non-contiguous.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a) || isCIDR(a) || (a.contains('-') && a.split('-').size() == 2 && isIP(a.split('-')[0]) && isIP(a.split('-')[1])))",message="each entry must be an IP, a CIDR or a range first-last"
	Addresses []string `json:"addresses"`

	// Prefix is the prefix length of the network the addresses are on,
	// given to each IPAddress.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix int32 `json:"prefix"`

	// Gateway is the network's gateway, given to each IPAddress and never
	// handed out.
	// +kubebuilder:validation:MaxLength=50
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// ExcludedAddresses are never handed out: IPs, ranges and CIDRs as in
	// Addresses.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a) || isCIDR(a) || (a.contains('-') && a.split('-').size() == 2 && isIP(a.split('-')[0]) && isIP(a.split('-')[1])))",message="each entry must be an IP, a CIDR or a range first-last"
	// +optional
	ExcludedAddresses []string `json:"excludedAddresses,omitempty"`

	// AddressReuseGracePeriod is how long a released address stays out of
	// use before it can be handed out again ("30s"; 0: at once).
	// +optional
	AddressReuseGracePeriod *metav1.Duration `json:"addressReuseGracePeriod,omitempty"`

	// AllocationStrategy is LowestFree (the default) or NextFit.
	// +kubebuilder:validation:Enum=LowestFree;NextFit
	// +kubebuilder:default=LowestFree
	// +optional
	AllocationStrategy string `json:"allocationStrategy,omitempty"`
}

// PoolAddresses counts a pool's addresses.
type PoolAddresses struct {
	// Total is the number of addresses that can be handed out (gateway
	// and exclusions not counted), saturating at MaxInt64.
	Total int64 `json:"total"`
	// Used is the number of addresses handed out and not yet free again
	// (those in their reuse grace period included).
	Used int64 `json:"used"`
	// Free is Total - Used.
	Free int64 `json:"free"`
	// OutOfRange is the number of IPAddresses of the pool whose address
	// is not in it (the pool was changed under them).
	OutOfRange int64 `json:"outOfRange"`
}

// ContivIPPoolStatus is what the provider observed.
type ContivIPPoolStatus struct {
	// Addresses counts the pool's addresses.
	// +optional
	Addresses *PoolAddresses `json:"ipAddresses,omitempty"`
	// Conditions: Ready is False when the spec cannot be served.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=contivippools,scope=Namespaced,categories=cluster-api,shortName=cip
// +kubebuilder:printcolumn:name="Addresses",type="string",JSONPath=".spec.addresses",description="The addresses of the pool"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.ipAddresses.total"
// +kubebuilder:printcolumn:name="Free",type="integer",JSONPath=".status.ipAddresses.free"
// +kubebuilder:printcolumn:name="Used",type="integer",JSONPath=".status.ipAddresses.used"

// ContivIPPool is a namespaced pool: claims of its namespace name it.
type ContivIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ContivIPPoolSpec   `json:"spec,omitempty"`
	Status ContivIPPoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ContivIPPoolList is a list of ContivIPPools.
type ContivIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ContivIPPool `json:"items"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=globalcontivippools,scope=Cluster,categories=cluster-api,shortName=gcip
// +kubebuilder:printcolumn:name="Addresses",type="string",JSONPath=".spec.addresses",description="The addresses of the pool"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.ipAddresses.total"
// +kubebuilder:printcolumn:name="Free",type="integer",JSONPath=".status.ipAddresses.free"
// +kubebuilder:printcolumn:name="Used",type="integer",JSONPath=".status.ipAddresses.used"

// GlobalContivIPPool is a cluster-scoped pool: claims of every namespace
// may name it, and its addresses are unique across all of them.
type GlobalContivIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ContivIPPoolSpec   `json:"spec,omitempty"`
	Status ContivIPPoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// GlobalContivIPPoolList is a list of GlobalContivIPPools.
type GlobalContivIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalContivIPPool `json:"items"`
}
