//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package ipamutil_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
)

// resources is a discovery document: a group version and its resources.
func resources(gv string, names ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, n := range names {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
	}
	return l
}

var (
	ipamV1beta2    = resources("ipam.cluster.x-k8s.io/v1beta2", "ipaddressclaims", "ipaddressclaims/status", "ipaddresses")
	ipamV1beta1    = resources("ipam.cluster.x-k8s.io/v1beta1", "ipaddressclaims", "ipaddressclaims/status", "ipaddresses")
	clusterV1beta2 = resources("cluster.x-k8s.io/v1beta2", "clusters", "clusters/status", "machines")
	clusterV1beta1 = resources("cluster.x-k8s.io/v1beta1", "clusters", "clusters/status")
	core           = resources("v1", "pods", "namespaces")
)

// swapDiscovery is a fake discovery whose documents a test may change
// while a VersionWatch reads them.
type swapDiscovery struct {
	mu sync.Mutex
	*fakediscovery.FakeDiscovery
}

func newDiscovery(lists ...*metav1.APIResourceList) *swapDiscovery {
	return &swapDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: lists}}}
}

func (d *swapDiscovery) set(lists ...*metav1.APIResourceList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Resources = lists
}

func (d *swapDiscovery) ServerGroups() (*metav1.APIGroupList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerGroups()
}

func (d *swapDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}

var _ discovery.DiscoveryInterface = (*swapDiscovery)(nil)

// v1beta2 is picked whenever it is served with the resources the
// reconciler uses, else v1beta1; a group at neither is ErrNotServed.
func TestDiscoverVersions(t *testing.T) {
	v1, v2 := ipamutil.V1Beta1, ipamutil.V1Beta2
	cases := []struct {
		name  string
		lists []*metav1.APIResourceList
		want  ipamutil.Versions
		err   string
	}{
		{"v1beta2 only", []*metav1.APIResourceList{core, ipamV1beta2, clusterV1beta2}, ipamutil.Versions{IPAM: v2, Cluster: v2}, ""},
		{"both served", []*metav1.APIResourceList{ipamV1beta1, ipamV1beta2, clusterV1beta1, clusterV1beta2}, ipamutil.Versions{IPAM: v2, Cluster: v2}, ""},
		{"v1beta1 only", []*metav1.APIResourceList{core, ipamV1beta1, clusterV1beta1}, ipamutil.Versions{IPAM: v1, Cluster: v1}, ""},
		{"mixed", []*metav1.APIResourceList{ipamV1beta1, ipamV1beta2, clusterV1beta1}, ipamutil.Versions{IPAM: v2, Cluster: v1}, ""},
		{"v1beta2 without the claim status", []*metav1.APIResourceList{
			resources("ipam.cluster.x-k8s.io/v1beta2", "ipaddressclaims", "ipaddresses"), ipamV1beta1, clusterV1beta2},
			ipamutil.Versions{IPAM: v1, Cluster: v2}, ""},
		{"no ipam group", []*metav1.APIResourceList{core, clusterV1beta2}, ipamutil.Versions{},
			"ipam.cluster.x-k8s.io serves versions [], resources needed: [ipaddressclaims ipaddressclaims/status ipaddresses]"},
		{"ipam v1alpha1 only", []*metav1.APIResourceList{resources("ipam.cluster.x-k8s.io/v1alpha1", "ipaddressclaims"), clusterV1beta1},
			ipamutil.Versions{}, "ipam.cluster.x-k8s.io serves versions [v1alpha1]"},
		{"no cluster group", []*metav1.APIResourceList{ipamV1beta2}, ipamutil.Versions{}, "cluster.x-k8s.io serves versions []"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ipamutil.DiscoverVersions(newDiscovery(tc.lists...))
			if tc.err != "" {
				g.Expect(err).To(MatchError(ipamutil.ErrNotServed))
				g.Expect(err.Error()).To(ContainSubstring(tc.err))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// A discovery failure is not "not served": it is returned as it is.
func TestDiscoverVersionsFails(t *testing.T) {
	g := NewWithT(t)
	d := newDiscovery(ipamV1beta2, clusterV1beta2)
	d.PrependReactor("get", "group", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	_, err := ipamutil.DiscoverVersions(d)
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	g.Expect(errors.Is(err, ipamutil.ErrNotServed)).To(BeFalse())
}

// The watch runs quietly while the versions stay, and ends with
// ErrVersionsChanged when an upgrade adds v1beta2 (or a group goes).
func TestVersionWatch(t *testing.T) {
	cases := []struct {
		name  string
		after []*metav1.APIResourceList
		want  string
	}{
		{"v1beta2 added", []*metav1.APIResourceList{ipamV1beta1, ipamV1beta2, clusterV1beta1}, "now ipam.cluster.x-k8s.io/v1beta2, cluster.x-k8s.io/v1beta1"},
		{"ipam group gone", []*metav1.APIResourceList{clusterV1beta1}, "ipam.cluster.x-k8s.io serves versions []"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := newDiscovery(ipamV1beta1, clusterV1beta1)
			started, err := ipamutil.DiscoverVersions(d)
			g.Expect(err).NotTo(HaveOccurred())
			w := &ipamutil.VersionWatch{Discovery: d, Started: started, Interval: 5 * time.Millisecond}
			g.Expect(w.NeedLeaderElection()).To(BeFalse())
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { done <- w.Start(ctx) }()
			g.Consistently(done).WithTimeout(100 * time.Millisecond).ShouldNot(Receive())
			d.set(tc.after...)
			var got error
			g.Eventually(done).WithTimeout(5 * time.Second).Should(Receive(&got))
			g.Expect(got).To(MatchError(ipamutil.ErrVersionsChanged))
			g.Expect(got.Error()).To(ContainSubstring("started with ipam.cluster.x-k8s.io/v1beta1, cluster.x-k8s.io/v1beta1"))
			g.Expect(got.Error()).To(ContainSubstring(tc.want))
		})
	}
	t.Run("context ends", func(t *testing.T) {
		g := NewWithT(t)
		d := newDiscovery(ipamV1beta2, clusterV1beta2)
		w := &ipamutil.VersionWatch{Discovery: d, Interval: 5 * time.Millisecond} // zero Started is v1beta2
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Start(ctx) }()
		g.Consistently(done).WithTimeout(100 * time.Millisecond).ShouldNot(Receive())
		cancel()
		g.Eventually(done).WithTimeout(5 * time.Second).Should(Receive(BeNil()))
	})
}

func TestVersionsValidate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ipamutil.Versions{}.Validate()).To(Succeed())
	g.Expect(ipamutil.Versions{IPAM: "v1beta1", Cluster: "v1beta2"}.Validate()).To(Succeed())
	g.Expect(ipamutil.Versions{IPAM: "v1alpha1"}.Validate()).To(MatchError(`ipamutil: ipam.cluster.x-k8s.io version "v1alpha1": want v1beta2 or v1beta1`))
	g.Expect(ipamutil.Versions{}.String()).To(Equal("ipam.cluster.x-k8s.io/v1beta2, cluster.x-k8s.io/v1beta2"))
	v1 := ipamutil.Versions{IPAM: "v1beta1", Cluster: "v1beta1"}
	g.Expect(v1.ClaimObject()).To(BeAssignableToTypeOf(&ipamv1beta1.IPAddressClaim{}))
	g.Expect(v1.AddressObject()).To(BeAssignableToTypeOf(&ipamv1beta1.IPAddress{}))
	g.Expect(v1.ClusterObject()).To(BeAssignableToTypeOf(&clusterv1beta1.Cluster{}))
	g.Expect(ipamutil.Versions{}.ClaimObject()).To(BeAssignableToTypeOf(&ipamv1.IPAddressClaim{}))
	g.Expect(ipamutil.Versions{}.ClusterObject()).To(BeAssignableToTypeOf(&clusterv1.Cluster{}))
}

// fakeAt is a fake API server of every version (no conversion: each
// object lives at the version it was written) and the client of
// NewClient at v over it.
func fakeAt(t *testing.T, v ipamutil.Versions) (raw, c client.Client) {
	raw = fake.NewClientBuilder().WithScheme(newScheme(t)).
		WithStatusSubresource(&ipamv1beta1.IPAddressClaim{}, &ipamv1.IPAddressClaim{}).Build()
	return raw, ipamutil.NewClient(raw, v)
}

// At v1beta1, the client takes and gives v1beta2 objects and stores
// v1beta1 ones, converted by Cluster API's functions: the poolRef's
// apiGroup pointer, the prefix as an int, the v1beta2 conditions under
// status.v1beta2 and the deprecated ones as status.conditions.
func TestClientAtV1Beta1(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	v1 := ipamutil.Versions{IPAM: ipamutil.V1Beta1, Cluster: ipamutil.V1Beta1}
	raw, c := fakeAt(t, v1)

	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m1"},
		Spec: ipamv1.IPAddressClaimSpec{ClusterName: "c1", PoolRef: ipamv1.IPPoolReference{APIGroup: "ipam.contivpp.io", Kind: "ContivIPPool", Name: "p"}}}
	g.Expect(c.Create(ctx, claim)).To(Succeed())
	g.Expect(claim.ResourceVersion).NotTo(BeEmpty(), "the answer is converted back into the caller's object")

	stored := &ipamv1beta1.IPAddressClaim{}
	g.Expect(raw.Get(ctx, client.ObjectKeyFromObject(claim), stored)).To(Succeed())
	g.Expect(stored.Spec.PoolRef).To(Equal(corev1.TypedLocalObjectReference{APIGroup: ptr.To("ipam.contivpp.io"), Kind: "ContivIPPool", Name: "p"}))
	g.Expect(stored.Spec.ClusterName).To(Equal("c1"))
	g.Expect(raw.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{})).NotTo(Succeed(), "nothing is stored at v1beta2")

	before := claim.DeepCopy()
	claim.Status.AddressRef.Name = "m1"
	claim.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	claim.Status.Deprecated = &ipamv1.IPAddressClaimDeprecatedStatus{V1Beta1: &ipamv1.IPAddressClaimV1Beta1DeprecatedStatus{
		Conditions: clusterv1.Conditions{{Type: "Ready", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}}
	g.Expect(c.Status().Patch(ctx, claim, ipamutil.MergeFrom(before, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	g.Expect(raw.Get(ctx, client.ObjectKeyFromObject(claim), stored)).To(Succeed())
	g.Expect(stored.Status.AddressRef.Name).To(Equal("m1"))
	g.Expect(stored.Status.V1Beta2).NotTo(BeNil())
	g.Expect(stored.Status.V1Beta2.Conditions).To(ConsistOf(HaveField("Reason", "Ready")))
	g.Expect(stored.Status.Conditions).To(ConsistOf(HaveField("Status", corev1.ConditionTrue)))

	// A patch the client cannot convert is refused, not sent in the
	// wrong shape.
	err := c.Patch(ctx, claim, client.MergeFrom(before))
	g.Expect(err).To(MatchError(ContainSubstring("make it with ipamutil.MergeFrom")))

	got := &ipamv1.IPAddressClaim{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
	g.Expect(got.Spec.PoolRef).To(Equal(claim.Spec.PoolRef))
	g.Expect(got.Status.Conditions).To(ConsistOf(HaveField("Reason", "Ready")))
	list := &ipamv1.IPAddressClaimList{}
	g.Expect(c.List(ctx, list, client.InNamespace("ns"))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Spec.PoolRef.APIGroup).To(Equal("ipam.contivpp.io"))

	addr := &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m1"},
		Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: "m1"}, PoolRef: claim.Spec.PoolRef,
			Address: "10.0.0.1", Prefix: ptr.To(int32(24)), Gateway: "10.0.0.254"}}
	g.Expect(c.Create(ctx, addr)).To(Succeed())
	storedAddr := &ipamv1beta1.IPAddress{}
	g.Expect(raw.Get(ctx, client.ObjectKeyFromObject(addr), storedAddr)).To(Succeed())
	g.Expect(storedAddr.Spec.Prefix).To(Equal(24))
	g.Expect(storedAddr.Spec.ClaimRef.Name).To(Equal("m1"))
	g.Expect(c.Delete(ctx, addr)).To(Succeed())
	g.Expect(raw.Get(ctx, client.ObjectKeyFromObject(addr), storedAddr)).NotTo(Succeed())

	// Clusters are read at v1beta1 too: spec.paused is a bool there.
	g.Expect(raw.Create(ctx, &clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"},
		Spec: clusterv1beta1.ClusterSpec{Paused: true}})).To(Succeed())
	cl := &clusterv1.Cluster{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c1"}, cl)).To(Succeed())
	g.Expect(cl.Spec.Paused).To(Equal(ptr.To(true)))
	gvk, err := c.GroupVersionKindFor(&ipamv1.IPAddressClaim{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gvk.GroupVersion()).To(Equal(ipamv1beta1.GroupVersion))
}

// At v1beta2 the client is the one given: nothing to convert.
func TestClientAtV1Beta2IsTheClient(t *testing.T) {
	g := NewWithT(t)
	raw, c := fakeAt(t, ipamutil.Versions{})
	g.Expect(c).To(BeIdenticalTo(raw))
}

// Watch events of either version convert to the internal shape.
func TestToInternal(t *testing.T) {
	g := NewWithT(t)
	in := &ipamv1beta1.IPAddress{Spec: ipamv1beta1.IPAddressSpec{Address: "10.0.0.1", Prefix: 24,
		PoolRef: corev1.TypedLocalObjectReference{APIGroup: ptr.To("g"), Kind: "K", Name: "p"}}}
	got, err := ipamutil.ToIPAddress(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Spec.Prefix).To(Equal(ptr.To(int32(24))))
	g.Expect(got.Spec.PoolRef).To(Equal(ipamv1.IPPoolReference{APIGroup: "g", Kind: "K", Name: "p"}))
	same := &ipamv1.IPAddress{}
	back, err := ipamutil.ToIPAddress(same)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(BeIdenticalTo(same))
	_, err = ipamutil.ToIPAddressClaim(&corev1.Pod{})
	g.Expect(err).To(HaveOccurred())
}
