//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package ipamutil_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/capitest"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
)

// v1beta1Claim is a claim of pool written as a v1beta1 object, labelled
// for the suite's watch filter.
func v1beta1Claim(ns, name, poolName, clusterName string) *ipamv1beta1.IPAddressClaim {
	return &ipamv1beta1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.WatchLabel: filter}},
		Spec: ipamv1beta1.IPAddressClaimSpec{ClusterName: clusterName, PoolRef: corev1.TypedLocalObjectReference{
			APIGroup: ptr.To(poolGK.Group), Kind: poolGK.Kind, Name: poolName}},
	}
}

// v1beta1State is what a v1beta1 reader sees of a claim: "gone", or the
// addressRef, the v1beta2 Ready "status/reason" and the v1beta1 Ready
// "status/reason/severity".
type v1beta1State struct {
	Address, Ready, ReadyV1Beta1 string
}

func (s *suite) v1beta1State(g Gomega, key types.NamespacedName) v1beta1State {
	c := &ipamv1beta1.IPAddressClaim{}
	if err := s.c.Get(context.Background(), key, c); err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return v1beta1State{Address: "gone"}
	}
	var st v1beta1State
	st.Address = c.Status.AddressRef.Name
	if c.Status.V1Beta2 != nil {
		for _, cond := range c.Status.V1Beta2.Conditions {
			if cond.Type == readyCond {
				st.Ready = string(cond.Status) + "/" + cond.Reason
			}
		}
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == clusterv1beta1.ReadyCondition {
			st.ReadyV1Beta1 = string(cond.Status) + "/" + cond.Reason + "/" + string(cond.Severity)
		}
	}
	return st
}

func (s *suite) eventuallyV1Beta1(g Gomega, key types.NamespacedName, want v1beta1State) {
	g.Eventually(func(g Gomega) v1beta1State { return s.v1beta1State(g, key) }).
		WithTimeout(wait).WithPolling(poll).Should(Equal(want), "claim %s", key)
}

// The reconciler serves claims written as v1beta1 objects in a cluster
// that serves v1beta1 and v1beta2 (conversion webhook) and in one that
// serves v1beta1 only (Cluster too): it discovers the versions, waits for
// a paused Cluster, serves a claim, sets PoolExhausted with the v1beta1
// condition a v1beta1 reader expects, and serves the waiting claim when
// the first is deleted (the IPAddress watch and the poolRef index at the
// served version).
func TestClaimReconcilerServedVersions(t *testing.T) {
	for _, served := range []capitest.Served{capitest.ServedBoth, capitest.ServedV1Beta1} {
		t.Run(served.String(), func(t *testing.T) {
			t.Parallel()
			testServed(t, served)
		})
	}
}

func testServed(t *testing.T, served capitest.Served) {
	g := NewWithT(t)
	ctx := context.Background()
	kube := capitest.Start(t, served)
	d, err := discovery.NewDiscoveryClientForConfig(kube.Config)
	g.Expect(err).NotTo(HaveOccurred())
	versions, err := ipamutil.DiscoverVersions(d)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions).To(Equal(served.Versions()))
	s := startSuiteAt(t, kube.Config, versions)
	ns := s.namespace(t, "served")
	s.create(t, pool(ns, "p", "10.0.0.1"))

	// A paused Cluster of the served version holds its claim.
	if versions.Cluster == ipamutil.V1Beta1 {
		s.create(t, &clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns, Labels: map[string]string{clusterv1.WatchLabel: filter}},
			Spec: clusterv1beta1.ClusterSpec{Paused: true}})
	} else {
		s.create(t, cluster(ns, "c1", func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }))
	}
	first, second := key(ns, "first"), key(ns, "second")
	s.create(t, v1beta1Claim(ns, first.Name, "p", "c1"))
	g.Consistently(func(g Gomega) v1beta1State { return s.v1beta1State(g, first) }).
		WithTimeout(still).WithPolling(poll).Should(Equal(v1beta1State{}))
	g.Expect(s.c.Get(ctx, first, &ipamv1beta1.IPAddressClaim{})).To(Succeed())
	if versions.Cluster == ipamutil.V1Beta1 {
		c := &clusterv1beta1.Cluster{}
		g.Expect(s.c.Get(ctx, key(ns, "c1"), c)).To(Succeed())
		c.Spec.Paused = false
		g.Expect(s.c.Update(ctx, c)).To(Succeed())
	} else {
		c := &clusterv1.Cluster{}
		g.Expect(s.c.Get(ctx, key(ns, "c1"), c)).To(Succeed())
		c.Spec.Paused = ptr.To(false)
		g.Expect(s.c.Update(ctx, c)).To(Succeed())
	}
	s.eventuallyV1Beta1(g, first, v1beta1State{Address: "first", Ready: "True/Ready", ReadyV1Beta1: "True//"})

	addr := &ipamv1beta1.IPAddress{}
	g.Expect(s.c.Get(ctx, first, addr)).To(Succeed())
	g.Expect(addr.Spec.Address).To(Equal("10.0.0.1"))
	g.Expect(addr.Spec.Prefix).To(Equal(24))
	g.Expect(addr.Spec.Gateway).To(Equal("10.0.0.254"))
	g.Expect(addr.Spec.PoolRef.APIGroup).To(Equal(ptr.To(poolGK.Group)))
	g.Expect(addr.Spec.ClaimRef.Name).To(Equal("first"))
	g.Expect(addr.Finalizers).To(ConsistOf(ipamutil.ProtectAddressFinalizer))
	g.Expect(addr.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "c1"))
	g.Expect(addr.OwnerReferences).To(ContainElement(And(
		HaveField("APIVersion", "ipam.cluster.x-k8s.io/"+versions.IPAM), HaveField("Kind", "IPAddressClaim"), HaveField("Name", "first"))))

	s.create(t, v1beta1Claim(ns, second.Name, "p", ""))
	s.eventuallyV1Beta1(g, second, v1beta1State{Ready: "False/PoolExhausted", ReadyV1Beta1: "False/PoolExhausted/Warning"})
	g.Expect(s.c.Delete(ctx, &ipamv1beta1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first.Name}})).To(Succeed())
	s.eventuallyV1Beta1(g, first, v1beta1State{Address: "gone"})
	s.eventuallyV1Beta1(g, second, v1beta1State{Address: "second", Ready: "True/Ready", ReadyV1Beta1: "True//"})
	g.Expect(s.c.Get(ctx, second, addr)).To(Succeed())
	g.Expect(addr.Spec.Address).To(Equal("10.0.0.1"))
	g.Expect(apierrorsIsNotFound(s.c.Get(ctx, first, &ipamv1beta1.IPAddress{}))).To(BeTrue(), "the first claim's IPAddress is deleted")

	if served == capitest.ServedBoth {
		// The same claim at v1beta2, and the conversions went through
		// the webhook.
		c := s.getClaim(g, second)
		g.Expect(readyReason(c)).To(Equal("True/Ready"))
		g.Expect(c.Spec.PoolRef).To(Equal(ipamv1.IPPoolReference{APIGroup: poolGK.Group, Kind: poolGK.Kind, Name: "p"}))
		g.Expect(kube.Webhook.Conversions()).To(BeNumerically(">", 0))
	}
}

func apierrorsIsNotFound(err error) bool {
	return err != nil && client.IgnoreNotFound(err) == nil
}
