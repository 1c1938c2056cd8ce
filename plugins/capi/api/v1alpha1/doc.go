// Package v1alpha1 is the API of the Contiv Cluster API IPAM provider:
// ContivIPPool (namespaced) and GlobalContivIPPool (cluster-scoped), the
// pools that IPAddressClaims (ipam.cluster.x-k8s.io) name in
// spec.poolRef. The CRDs are generated from these types by controller-gen
// (`make generate`) into plugins/capi/api/crd/.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.contivpp.io
package v1alpha1
