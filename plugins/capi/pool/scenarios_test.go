package pool_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
	"github.com/contiv-ipam/agent/plugins/capi/pool"
)

// The provider on a real API server, one scenario per namespace, in
// order (the restart scenario replaces the provider).
func TestProvider(t *testing.T) {
	e := startEnv(t)
	stop := e.startProvider(t, 8)
	t.Run("500 concurrent claims, then 100 deleted with a grace period", func(t *testing.T) { testMany(t, e) })
	t.Run("an exhausted pool serves its waiting claims when an address frees", func(t *testing.T) { testExhausted(t, e) })
	t.Run("IPv6 ranges, exclusions and the gateway", func(t *testing.T) { testIPv6(t, e) })
	t.Run("a global pool serves every namespace without duplicates", func(t *testing.T) { testGlobal(t, e) })
	t.Run("a pool with addresses is not deleted", func(t *testing.T) { testPoolDeletion(t, e) })
	t.Run("a restart in the middle hands nothing out twice", func(t *testing.T) {
		stop = testRestart(t, e, stop)
	})
}

func testMany(t *testing.T, e *env) {
	g := NewWithT(t)
	ns := e.namespace(t, "many")
	grace := 3 * time.Second
	spec := v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.10.0.0/22"}, Prefix: 22, Gateway: "10.10.0.1",
		AddressReuseGracePeriod: &metav1.Duration{Duration: grace}}
	g.Expect(e.c.Create(context.Background(), newPool(ns, "p", spec))).To(Succeed())
	names := e.createClaims(t, ns, "m", pool.KindPool, "p", 500)
	g.Eventually(func(g Gomega) int { return e.readyCount(g, ns) }).WithTimeout(wait).WithPolling(poll).Should(Equal(500))
	got := e.addresses(g, ns)
	g.Expect(got).To(HaveLen(500))
	block := netip.MustParsePrefix("10.10.0.0/22")
	for who, a := range got {
		g.Expect(block.Contains(a)).To(BeTrue(), "%s: %s", who, a)
		g.Expect(a).NotTo(Equal(netip.MustParseAddr("10.10.0.1")), "the gateway")
		g.Expect(a).NotTo(Equal(netip.MustParseAddr("10.10.0.0")), "the network address")
	}
	// 1,024 addresses less the network, the broadcast and the gateway.
	g.Eventually(func(g Gomega) *v1alpha1.PoolAddresses { return e.status(g, ns, "p") }).WithTimeout(wait).
		Should(Equal(&v1alpha1.PoolAddresses{Total: 1021, Used: 500, Free: 521}))

	// The provider's clock stands still while the claims are deleted and
	// the IPAddresses watched: on a loaded machine the deletes and the
	// checks may take longer than the grace period in real time.
	e.clock.freeze()
	for _, name := range names[:100] {
		g.Expect(e.c.Delete(context.Background(), newClaim(ns, name, pool.KindPool, "p"))).To(Succeed())
	}
	g.Consistently(func(g Gomega) int { return len(e.addresses(g, ns)) }).WithTimeout(grace).
		Should(Equal(500), "the IPAddresses stay while the grace period runs")
	g.Expect(e.status(g, ns, "p").Used).To(BeEquivalentTo(500), "in grace: still used")
	// Every deletion timestamp is at most now; the period counts from one
	// second after it.
	e.clock.resumeAt(time.Now().Add(grace + 2*time.Second))
	g.Eventually(func(g Gomega) int { return len(e.addresses(g, ns)) }).WithTimeout(wait).Should(Equal(400))
	g.Eventually(func(g Gomega) *v1alpha1.PoolAddresses { return e.status(g, ns, "p") }).WithTimeout(wait).
		Should(Equal(&v1alpha1.PoolAddresses{Total: 1021, Used: 400, Free: 621}))
}

func testExhausted(t *testing.T, e *env) {
	g := NewWithT(t)
	ns := e.namespace(t, "exhausted")
	spec := v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.20.0.10-10.20.0.12"}, Prefix: 24}
	g.Expect(e.c.Create(context.Background(), newPool(ns, "p", spec))).To(Succeed())
	names := e.createClaims(t, ns, "x", pool.KindPool, "p", 5)
	reasons := func(g Gomega) map[string]int {
		out := map[string]int{}
		for _, name := range names {
			var c ipamv1.IPAddressClaim
			if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
				out["gone"]++
				continue
			}
			ok, reason := readyReason(&c)
			if ok {
				reason = "Ready"
			}
			out[reason]++
		}
		return out
	}
	g.Eventually(reasons).WithTimeout(wait).Should(Equal(map[string]int{"Ready": 3, ipamv1.IPAddressClaimReadyPoolExhaustedReason: 2}))
	var victim string
	for name, a := range e.addresses(g, ns) {
		if a == netip.MustParseAddr("10.20.0.11") {
			victim = name
		}
	}
	g.Expect(victim).NotTo(BeEmpty())
	victimClaim := newClaim(ns, victim[len(ns)+1:], pool.KindPool, "p")
	g.Expect(e.c.Delete(context.Background(), victimClaim)).To(Succeed())
	g.Eventually(reasons).WithTimeout(wait).
		Should(Equal(map[string]int{"gone": 1, "Ready": 3, ipamv1.IPAddressClaimReadyPoolExhaustedReason: 1}))
	g.Expect(e.addresses(g, ns)).To(ContainElement(netip.MustParseAddr("10.20.0.11")), "the freed address is handed out again")
}

func testIPv6(t *testing.T, e *env) {
	g := NewWithT(t)
	ns := e.namespace(t, "six")
	spec := v1alpha1.ContivIPPoolSpec{Addresses: []string{"fd00:10::1-fd00:10::8", "fd00:10::100/126"}, Prefix: 64,
		Gateway: "fd00:10::1", ExcludedAddresses: []string{"fd00:10::3"}}
	g.Expect(e.c.Create(context.Background(), newPool(ns, "p", spec))).To(Succeed())
	e.createClaims(t, ns, "v", pool.KindPool, "p", 10)
	g.Eventually(func(g Gomega) int { return e.readyCount(g, ns) }).WithTimeout(wait).Should(Equal(9))
	var got []netip.Addr
	for _, a := range e.addresses(g, ns) {
		got = append(got, a)
	}
	// ::1 is the gateway, ::3 excluded, ::100 the subnet-router anycast
	// address of the /126.
	want := []string{"fd00:10::2", "fd00:10::4", "fd00:10::5", "fd00:10::6", "fd00:10::7", "fd00:10::8",
		"fd00:10::101", "fd00:10::102", "fd00:10::103"}
	wantAddrs := make([]netip.Addr, len(want))
	for i, s := range want {
		wantAddrs[i] = netip.MustParseAddr(s)
	}
	g.Expect(got).To(ConsistOf(wantAddrs))
	// Which of the ten claims is refused is a race between the workers:
	// every IPAddress handed out carries the gateway and prefix, whichever
	// claims won.
	var list ipamv1.IPAddressList
	g.Expect(e.c.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(9))
	for _, ip := range list.Items {
		g.Expect(ip.Spec.Gateway).To(Equal("fd00:10::1"), ip.Name)
		g.Expect(ip.Spec.Prefix).NotTo(BeNil(), ip.Name)
		g.Expect(*ip.Spec.Prefix).To(BeEquivalentTo(64), ip.Name)
	}
}

func testGlobal(t *testing.T, e *env) {
	g := NewWithT(t)
	a, b := e.namespace(t, "global-a"), e.namespace(t, "global-b")
	gp := &v1alpha1.GlobalContivIPPool{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.30.0.0/24"}, Prefix: 24}}
	g.Expect(e.c.Create(context.Background(), gp)).To(Succeed())
	e.createClaims(t, a, "c", pool.KindGlobalPool, "shared", 30)
	e.createClaims(t, b, "c", pool.KindGlobalPool, "shared", 30)
	g.Eventually(func(g Gomega) int { return e.readyCount(g, a) + e.readyCount(g, b) }).WithTimeout(wait).Should(Equal(60))
	g.Expect(e.addresses(g, a, b)).To(HaveLen(60), "distinct across the namespaces")
}

func testPoolDeletion(t *testing.T, e *env) {
	g := NewWithT(t)
	ns := e.namespace(t, "deletion")
	g.Expect(e.c.Create(context.Background(), newPool(ns, "p", v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.40.0.0/28"}, Prefix: 28}))).To(Succeed())
	e.createClaims(t, ns, "d", pool.KindPool, "p", 2)
	g.Eventually(func(g Gomega) int { return e.readyCount(g, ns) }).WithTimeout(wait).Should(Equal(2))
	g.Expect(e.c.Delete(context.Background(), newPool(ns, "p", v1alpha1.ContivIPPoolSpec{}))).To(Succeed())
	g.Consistently(func() error {
		return e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "p"}, &v1alpha1.ContivIPPool{})
	}).WithTimeout(time.Second).Should(Succeed(), "kept by its finalizer while it has addresses")
	for _, name := range []string{"d-0", "d-1"} {
		g.Expect(e.c.Delete(context.Background(), newClaim(ns, name, pool.KindPool, "p"))).To(Succeed())
	}
	g.Eventually(func() error {
		return e.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "p"}, &v1alpha1.ContivIPPool{})
	}).WithTimeout(wait).Should(MatchError(ContainSubstring("not found")))
}

func testRestart(t *testing.T, e *env, stop func()) func() {
	g := NewWithT(t)
	ns := e.namespace(t, "restart")
	g.Expect(e.c.Create(context.Background(), newPool(ns, "p", v1alpha1.ContivIPPoolSpec{Addresses: []string{"10.50.0.0/24"}, Prefix: 24}))).To(Succeed())
	e.createClaims(t, ns, "r", pool.KindPool, "p", 150)
	g.Eventually(func(g Gomega) int { return e.readyCount(g, ns) }).WithTimeout(wait).Should(BeNumerically(">=", 20))
	stop()
	before := e.readyCount(g, ns)
	t.Logf("%d of 150 claims Ready when the provider stopped", before)
	stop = e.startProvider(t, 8)
	g.Eventually(func(g Gomega) int { return e.readyCount(g, ns) }).WithTimeout(wait).Should(Equal(150))
	g.Expect(e.addresses(g, ns)).To(HaveLen(150))
	return stop
}
