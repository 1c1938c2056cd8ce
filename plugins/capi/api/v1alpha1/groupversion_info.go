package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is ipam.contivpp.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "ipam.contivpp.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&ContivIPPool{}, &ContivIPPoolList{}, &GlobalContivIPPool{}, &GlobalContivIPPoolList{})
}
