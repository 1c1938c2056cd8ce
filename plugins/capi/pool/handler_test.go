package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/ipamutil"
	"github.com/contiv-ipam/agent/plugins/capi/pool"
)

// handlerRig is a Provider on a fake client whose cache never shows an
// IPAddress: the stale cache of the reference provider's duplicates.
type handlerRig struct {
	p     *pool.Provider
	clock *clocktesting.FakeClock
	c     client.Client
}

func newHandlerRig(t *testing.T, spec v1alpha1.ContivIPPoolSpec) *handlerRig {
	t.Helper()
	scheme, err := pool.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	p := newPool("ns", "p", spec)
	p.Generation = 1
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(p).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	return &handlerRig{p: &pool.Provider{Reader: c, Claims: c, Clock: clk}, clock: clk, c: c}
}

// ensure runs FetchPool and EnsureAddress for claim with an empty IPAddress
// (what the reconciler does while its cache shows none).
func (r *handlerRig) ensure(g Gomega, claim string) (string, error) {
	h := r.p.ClaimHandlerFor(r.c, newClaim("ns", claim, pool.KindPool, "p"))
	_, _, err := h.FetchPool(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	var ip ipamv1.IPAddress
	_, err = h.EnsureAddress(context.Background(), &ip)
	return ip.Spec.Address, err
}

// Claims reconciled while the cache shows none of the IPAddresses created
// so far still get distinct addresses, and a claim asked again gets its
// own address again.
func TestAStaleCacheGivesNoDuplicate(t *testing.T) {
	g := NewWithT(t)
	r := newHandlerRig(t, v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.0.0.1-10.0.0.3"}, Prefix: 24})
	a, err := r.ensure(g, "a")
	g.Expect(err).NotTo(HaveOccurred())
	b, err := r.ensure(g, "b")
	g.Expect(err).NotTo(HaveOccurred())
	again, err := r.ensure(g, "a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{a, b, again}).To(Equal([]string{"10.0.0.1", "10.0.0.2", "10.0.0.1"}))
	c, err := r.ensure(g, "c")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c).To(Equal("10.0.0.3"))
	_, err = r.ensure(g, "d")
	g.Expect(errors.Is(err, ipamutil.ErrPoolExhausted)).To(BeTrue(), "%v", err)
}

// The release of a deleted claim holds the address for the grace period
// counted from the deletion timestamp plus a second.
func TestReleaseWaitsForTheGracePeriod(t *testing.T) {
	g := NewWithT(t)
	r := newHandlerRig(t, v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.0.0.1"}, Prefix: 24,
		AddressReuseGracePeriod: &metav1.Duration{Duration: 10 * time.Second}})
	_, err := r.ensure(g, "a")
	g.Expect(err).NotTo(HaveOccurred())
	claim := newClaim("ns", "a", pool.KindPool, "p")
	claim.DeletionTimestamp = &metav1.Time{Time: r.clock.Now()}
	h := r.p.ClaimHandlerFor(r.c, claim)
	_, _, err = h.FetchPool(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	res, err := h.ReleaseAddress(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).NotTo(BeNil())
	g.Expect(res.RequeueAfter).To(Equal(11 * time.Second))
	_, err = r.ensure(g, "b")
	g.Expect(errors.Is(err, ipamutil.ErrPoolExhausted)).To(BeTrue(), "in grace")
	r.clock.Step(11 * time.Second)
	res, err = h.ReleaseAddress(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(BeNil())
	b, err := r.ensure(g, "b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(Equal("10.0.0.1"))
}
