//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package pool_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/capitest"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
	"github.com/contiv-ipam/agent/plugins/capi/pool"
)

// startServedEnv is startEnv on a management cluster of the served
// shape, with the versions discovered; env.c converts to them.
func startServedEnv(t *testing.T, served capitest.Served) *env {
	t.Helper()
	kube := capitest.Start(t, served)
	scheme, err := pool.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(kube.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	raw, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := ipamutil.DiscoverVersions(d)
	if err != nil {
		t.Fatal(err)
	}
	if versions != served.Versions() {
		t.Fatalf("discovered %v on %v", versions, served)
	}
	return &env{cfg: cfg, c: ipamutil.NewClient(raw, versions), raw: raw, scheme: scheme, clock: &stepClock{}, versions: versions}
}

// createV1Beta1Claims creates claims prefix-from ... prefix-(to-1) as
// v1beta1 objects.
func (e *env) createV1Beta1Claims(t *testing.T, ns, prefix, poolName string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		c := &ipamv1beta1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: ipamv1beta1.IPAddressClaimSpec{PoolRef: corev1.TypedLocalObjectReference{
				APIGroup: ptr(v1alpha1.GroupVersion.Group), Kind: pool.KindPool, Name: poolName}}}
		if err := e.raw.Create(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
}

// The provider serves claims written as v1beta1 objects where the
// cluster serves v1beta1 and v1beta2 (conversion webhook) and where it
// serves v1beta1 only: every claim gets its own address, the pool counts
// them, a restarted provider rebuilds its engine from the IPAddresses at
// the served version and hands nothing out twice, and deleted claims
// give their addresses back.
func TestProviderServedVersions(t *testing.T) {
	for _, served := range []capitest.Served{capitest.ServedBoth, capitest.ServedV1Beta1} {
		t.Run(served.String(), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			e := startServedEnv(t, served)
			stop := e.startProvider(t, 4)
			ns := e.namespace(t, "served")
			spec := v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.60.0.0/24"}, Prefix: 24, Gateway: "10.60.0.1"}
			g.Expect(e.c.Create(context.Background(), newPool(ns, "p", spec))).To(Succeed())
			e.createV1Beta1Claims(t, ns, "m", "p", 0, 40)
			g.Eventually(func(g Gomega) int { return e.readyCount(g, ns) }).WithTimeout(wait).WithPolling(poll).Should(Equal(40))
			g.Expect(e.addresses(g, ns)).To(HaveLen(40))
			g.Eventually(func(g Gomega) *v1alpha1.PoolAddresses { return e.status(g, ns, "p") }).WithTimeout(wait).
				Should(Equal(&v1alpha1.PoolAddresses{Total: 253, Used: 40, Free: 213}))

			stop()
			e.startProvider(t, 4)
			e.createV1Beta1Claims(t, ns, "m", "p", 40, 60)
			g.Eventually(func(g Gomega) int { return e.readyCount(g, ns) }).WithTimeout(wait).WithPolling(poll).Should(Equal(60))
			g.Expect(e.addresses(g, ns)).To(HaveLen(60), "no address twice after the restart")

			for i := range 30 {
				c := &ipamv1beta1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%d", i)}}
				g.Expect(e.raw.Delete(context.Background(), c)).To(Succeed())
			}
			g.Eventually(func(g Gomega) int { return len(e.addresses(g, ns)) }).WithTimeout(wait).WithPolling(poll).Should(Equal(30))
			g.Eventually(func(g Gomega) *v1alpha1.PoolAddresses { return e.status(g, ns, "p") }).WithTimeout(wait).
				Should(Equal(&v1alpha1.PoolAddresses{Total: 253, Used: 30, Free: 223}))
			var list ipamv1beta1.IPAddressList
			g.Expect(e.raw.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(30), "the IPAddresses, read at v1beta1")
		})
	}
}
