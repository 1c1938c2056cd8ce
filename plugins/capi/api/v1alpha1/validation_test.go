package v1alpha1_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// The CRDs refuse a malformed pool with a message that names the field
// and the value; a good pool is accepted with its defaults filled.
func TestPoolValidation(t *testing.T) {
	kube := kubeenv.StartT(t, kubeenv.WithCRDs("plugins/capi/api/crd"))
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(kube.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	good := v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.0.0.10-10.0.0.20", "10.0.1.0/24", "10.0.2.5", "fd00::/120"},
		Prefix: 16, Gateway: "10.0.0.1", ExcludedAddresses: []string{"10.0.1.7"}}
	cases := []struct {
		name string
		edit func(s *v1alpha1.ContivIPPoolSpec)
		want []string // substrings of the refusal; none: accepted
	}{
		{"good", func(*v1alpha1.ContivIPPoolSpec) {}, nil},
		{"no addresses", func(s *v1alpha1.ContivIPPoolSpec) { s.Addresses = nil }, []string{"spec.addresses"}},
		{"not an address", func(s *v1alpha1.ContivIPPoolSpec) { s.Addresses = []string{"10.0.0.300"} },
			[]string{"spec.addresses", "must be an IP, a CIDR or a range"}},
		{"bad range", func(s *v1alpha1.ContivIPPoolSpec) { s.Addresses = []string{"10.0.0.1-"} },
			[]string{"spec.addresses", "must be an IP, a CIDR or a range"}},
		{"bad exclusion", func(s *v1alpha1.ContivIPPoolSpec) { s.ExcludedAddresses = []string{"x"} },
			[]string{"spec.excludedAddresses"}},
		{"prefix too long", func(s *v1alpha1.ContivIPPoolSpec) { s.Prefix = 129 }, []string{"spec.prefix", "129"}},
		{"bad gateway", func(s *v1alpha1.ContivIPPoolSpec) { s.Gateway = "10.0.0" }, []string{"gateway must be an IP address"}},
		{"bad strategy", func(s *v1alpha1.ContivIPPoolSpec) { s.AllocationStrategy = "Random" },
			[]string{"spec.allocationStrategy", "Random"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := good
			spec.Addresses = append([]string(nil), good.Addresses...)
			tc.edit(&spec)
			pool := &v1alpha1.ContivIPPool{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Namespace: "default"}, Spec: spec}
			err := c.Create(context.Background(), pool)
			if tc.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pool.Spec.AllocationStrategy).To(Equal(v1alpha1.LowestFree), "defaulted")
				return
			}
			g.Expect(err).To(HaveOccurred())
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}
