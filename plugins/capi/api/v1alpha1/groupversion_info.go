package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is ipam.contivpp.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "ipam.contivpp.io", Version: "v1alpha1"}

var schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds the types of this package to a scheme.
var AddToScheme = schemeBuilder.AddToScheme

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ContivIPPool{}, &ContivIPPoolList{}, &GlobalContivIPPool{}, &GlobalContivIPPoolList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
