//lint:file-ignore SA1019 Cluster API's v1beta1 packages and the deprecated v1beta1 conditions are what a management cluster at v1beta1 serves

package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/capitest"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
	"github.com/contiv-ipam/agent/plugins/capi/pool"
)

// servedProvider runs serveOn against kube until the returned stop.
type servedProvider struct {
	logs syncBuffer
	// err is serveOn's, once done is closed.
	err  error
	done chan struct{}
}

func startServed(t *testing.T, kube *capitest.Env) *servedProvider {
	t.Helper()
	p := &servedProvider{done: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(&p.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	o := options{metrics: "0", health: "0", leaderElect: false, workers: 2, versionCheck: 100 * time.Millisecond,
		skipNameCheck: true} // several managers in this process
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(p.done)
		p.err = serveOn(ctx, kube.Config, "test", o, log)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
		if t.Failed() {
			t.Log(p.logs.String())
		}
	})
	return p
}

// v1beta1Claim writes a claim of the ContivIPPool p as a v1beta1 object.
func v1beta1Claim(g Gomega, c client.Client, name string) {
	g.Expect(c.Create(context.Background(), &ipamv1beta1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: ipamv1beta1.IPAddressClaimSpec{PoolRef: corev1.TypedLocalObjectReference{
			APIGroup: ptr.To(v1alpha1.GroupVersion.Group), Kind: pool.KindPool, Name: "p"}}})).To(Succeed())
}

// v1beta1Address waits until the claim, read at v1beta1, is Ready (both
// its v1beta1 condition and its v1beta2 one) and returns its address.
func v1beta1Address(g Gomega, c client.Client, name string, logs func() string) string {
	var addr string
	g.Eventually(func(g Gomega) {
		claim := &ipamv1beta1.IPAddressClaim{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, claim)).To(Succeed())
		g.Expect(claim.Status.AddressRef.Name).To(Equal(name))
		g.Expect(claim.Status.Conditions).To(ContainElement(And(HaveField("Type", BeEquivalentTo("Ready")), HaveField("Status", corev1.ConditionTrue))))
		g.Expect(claim.Status.V1Beta2).NotTo(BeNil())
		g.Expect(claim.Status.V1Beta2.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue))))
		ip := &ipamv1beta1.IPAddress{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, ip)).To(Succeed())
		addr = ip.Spec.Address
	}).WithTimeout(30*time.Second).Should(Succeed(), logs)
	return addr
}

// The command serves v1beta1 claims where the Cluster API CRDs serve
// v1beta1 and v1beta2 (conversion webhook) and where they serve v1beta1
// only, and says which versions it talks. When a v1beta1-only cluster is
// upgraded to serve v1beta2, the running provider stops with
// ErrVersionsChanged; started again it talks v1beta2 and keeps every
// address.
func TestServesClaimsAtEveryServedVersion(t *testing.T) {
	t.Run("v1beta1+v1beta2", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		kube := capitest.Start(t, capitest.ServedBoth)
		c := newClient(g, kube)
		p := startServed(t, kube)
		createPool(g, c)
		v1beta1Claim(g, c, "m1")
		g.Expect(v1beta1Address(g, c, "m1", p.logs.String)).To(Equal("192.168.30.10"))
		g.Expect(p.logs.String()).To(ContainSubstring("ipam-version=ipam.cluster.x-k8s.io/v1beta2 cluster-version=cluster.x-k8s.io/v1beta2"))
		g.Expect(kube.Webhook.Conversions()).To(BeNumerically(">", 0))
	})
	t.Run("v1beta1, then upgraded", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		kube := capitest.Start(t, capitest.ServedV1Beta1)
		c := newClient(g, kube)
		p := startServed(t, kube)
		createPool(g, c)
		v1beta1Claim(g, c, "m1")
		g.Expect(v1beta1Address(g, c, "m1", p.logs.String)).To(Equal("192.168.30.10"))
		g.Expect(p.logs.String()).To(ContainSubstring("ipam-version=ipam.cluster.x-k8s.io/v1beta1 cluster-version=cluster.x-k8s.io/v1beta1"))

		kube.Upgrade(t)
		g.Eventually(p.done).WithTimeout(30 * time.Second).Should(BeClosed())
		g.Expect(p.err).To(MatchError(ipamutil.ErrVersionsChanged))

		again := startServed(t, kube)
		v1beta1Claim(g, c, "m2")
		g.Expect(v1beta1Address(g, c, "m2", again.logs.String)).To(Equal("192.168.30.11"), "m1 keeps .10")
		g.Expect(again.logs.String()).To(ContainSubstring("ipam-version=ipam.cluster.x-k8s.io/v1beta2 cluster-version=cluster.x-k8s.io/v1beta1"))
		g.Expect(v1beta1Address(g, c, "m1", again.logs.String)).To(Equal("192.168.30.10"))
	})
}

func newClient(g Gomega, kube *capitest.Env) client.Client {
	scheme, err := pool.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(kube.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func createPool(g Gomega, c client.Client) {
	p := &v1alpha1.ContivIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Spec: v1alpha1.ContivIPPoolSpec{Addresses: []string{"192.168.30.10-192.168.30.20"}, Prefix: 24, Gateway: "192.168.30.1"}}
	g.Expect(c.Create(context.Background(), p)).To(Succeed())
}
