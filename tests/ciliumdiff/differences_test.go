package ciliumdiff

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/onsi/gomega"

	ciliumipam "github.com/cilium/cilium/pkg/ipam"
	"github.com/cilium/cilium/pkg/ipam/service/ipallocator"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

// The pins of the table (table_test.go), one scenario each, and the
// agreements that used to be differences. Each pin asserts both sides'
// behaviour: once they agree, the pin fails and the entry must go.

// cap64 is dualStack with an IPv6 /64 per node: node 1 gets
// fd00:10:0:1::/64.
const cap64 = `
ipamConfig:
  podSubnetCIDR: 10.1.0.0/16
  podSubnetOneNodePrefixLen: 24
  vppHostSubnetCIDR: 172.30.0.0/16
  vppHostSubnetOneNodePrefixLen: 24
  vxlanCIDR: 192.168.30.0/24
  dualStack:
    podSubnetCIDR: fd00:10::/48
    podSubnetOneNodePrefixLen: 64
    vppHostSubnetCIDR: fd00:30::/48
    vppHostSubnetOneNodePrefixLen: 120
    vxlanCIDR: fd00:17::/64
    serviceCIDR: fd00:96::/112
`

// both runs f for each family, as a subtest named after it.
func both(t *testing.T, f func(t *testing.T, x fam)) {
	for _, fa := range []ipam.Family{ipam.IPv4, ipam.IPv6} {
		t.Run(string(fa), func(t *testing.T) { f(t, famOf(fa)) })
	}
}

// pair is our plugin and Cilium's IPAM on node 1's dual-stack subnets,
// Cilium's side holding the gateways and NAT loopbacks (reserved).
func pair(t testing.TB) (*ipam.Plugin, *cilium) {
	t.Helper()
	p := newOurs(t, dualStack, inMemory)
	checkSubnets(t, p, podV4, podV6)
	c := newCilium(podV4, podV6)
	c.reserveRouter(t, famOf(ipam.IPv4))
	c.reserveRouter(t, famOf(ipam.IPv6))
	return p, c
}

// heldBy is what Cilium's Dump holds but the gateways and NAT loopbacks.
func heldBy(t testing.TB, c *cilium) map[netip.Addr]string {
	t.Helper()
	m := c.dump(t)
	for a, o := range m {
		if o == "reserved" {
			delete(m, a)
		}
	}
	return m
}

// oursHeld is our Dump of both families.
func oursHeld(t testing.TB, p *ipam.Plugin) map[netip.Addr]string {
	t.Helper()
	v4, v6, _ := p.Dump()
	m := dumpOf(t, v4)
	for a, o := range dumpOf(t, v6) {
		m[a] = o
	}
	return m
}

// fill allocates every free address of family f on both sides, to owner
// "default/fill".
func fill(t testing.TB, p *ipam.Plugin, c *cilium, f ipam.Family) {
	t.Helper()
	for {
		_, err := p.AllocateNextFamily(f, "default/fill")
		if ourClass(err) == full {
			break
		}
		if err != nil {
			t.Fatalf("ours: fill %s: %v", f, err)
		}
	}
	for {
		_, err := c.AllocateNextFamily(ciliumipam.Family(f), "default/fill", pool)
		if ciliumClass(err) == full {
			break
		}
		if err != nil {
			t.Fatalf("cilium: fill %s: %v", f, err)
		}
	}
}

func pinReservedAddresses(t *testing.T) {
	both(t, func(t *testing.T, x fam) {
		g := NewWithT(t)
		p := newOurs(t, dualStack, inMemory)
		c := newCilium(podV4, podV6)
		// Cilium: its agent takes the router address itself; the gateway
		// and the NAT loopback are addresses like any other.
		g.Expect(c.AllocateIP(x.gateway, "router", pool)).To(Succeed())
		g.Expect(c.AllocateIP(x.natLoop, "default/pod", pool)).To(Succeed())
		g.Expect(ciliumClass(c.AllocateIP(x.gateway, "default/other", pool))).To(Equal(taken))
		for _, r := range []netip.Addr{x.network, x.last} {
			g.Expect(ciliumClass(c.AllocateIP(r, "default/pod", pool))).To(Equal(outOfRange), "cilium AllocateIP(%s)", r)
		}
		for _, r := range []netip.Addr{x.gateway, x.natLoop, x.network, x.last} {
			g.Expect(p.AllocateIP(ipOf(r), "default/pod")).To(MatchError(ipalloc.ErrReserved), "our AllocateIP(%s)", r)
		}
		// Filling a fresh node: Cilium hands out two addresses more.
		c = newCilium(podV4, podV6)
		n := 0
		for ; ; n++ {
			if _, err := c.AllocateNextFamily(ciliumipam.Family(x.f), fmt.Sprintf("default/p%d", n), pool); err != nil {
				g.Expect(err).To(MatchError(ipallocator.ErrFull))
				break
			}
		}
		m := 0
		for ; ; m++ {
			if _, err := p.AllocateNextFamily(x.f, fmt.Sprintf("default/p%d", m)); err != nil {
				g.Expect(err).To(MatchError(ipalloc.ErrPoolExhausted))
				break
			}
		}
		g.Expect(m).To(Equal(len(x.window)))
		g.Expect(n).To(Equal(len(x.window) + 2))
		g.Expect(oursHeld(t, p)).NotTo(HaveKey(x.gateway))
		g.Expect(c.dump(t)).To(HaveKey(x.gateway))
	})
}

func pinExclusionCheckedFirst(t *testing.T) {
	both(t, func(t *testing.T, x fam) {
		g := NewWithT(t)
		p, c := pair(t)
		for _, a := range []netip.Addr{x.gateway, x.natLoop, x.network, x.last, x.outside[0]} {
			p.BlacklistIP(ipOf(a), "blacklist")
			c.ExcludeIP(a, "blacklist", pool)
			want := ipalloc.ErrReserved
			if a == x.outside[0] {
				want = ipalloc.ErrOutOfRange
			}
			g.Expect(p.AllocateIP(ipOf(a), "default/pod")).To(MatchError(want), "our AllocateIP(%s)", a)
			g.Expect(ciliumClass(c.AllocateIP(a, "default/pod", pool))).To(Equal(excluded), "cilium AllocateIP(%s)", a)
		}
		_, status := allocatorOf(p, x.f).Dump()
		g.Expect(status).To(ContainSubstring("%s: 0/12 allocated, 0 excluded", x.prefix))
	})
}

func pinNextFit(t *testing.T) {
	both(t, func(t *testing.T, x fam) {
		g := NewWithT(t)
		// Cilium: the same addresses, in a random order; four fresh
		// nodes all handing them out lowest first would be a chance of
		// about 1 in 10^12.
		random := false
		for range 4 {
			p, c := pair(t)
			var ours, cil []netip.Addr
			for range x.window {
				r, err := p.AllocateNextFamily(x.f, "default/pod")
				g.Expect(err).NotTo(HaveOccurred())
				ours = append(ours, addrOf(t, r.IP))
				cr, err := c.AllocateNextFamily(ciliumipam.Family(x.f), "default/pod", pool)
				g.Expect(err).NotTo(HaveOccurred())
				cil = append(cil, cr.IP)
			}
			g.Expect(ours).To(Equal(x.window), "next-fit from the start: in order")
			g.Expect(cil).To(ConsistOf(x.window))
			random = random || !reflect.DeepEqual(cil, x.window)
		}
		g.Expect(random).To(BeTrue(), "Cilium's order is random")

		// Ours after a release: the next after the last handed out; the
		// released address waits until the cursor has gone round.
		p := newOurs(t, dualStack, inMemory)
		for range 3 {
			_, err := p.AllocateNextFamily(x.f, "default/pod")
			g.Expect(err).NotTo(HaveOccurred())
		}
		g.Expect(p.ReleaseIP(ipOf(x.window[0]))).To(Succeed())
		for _, want := range x.window[3:] {
			r, err := p.AllocateNextFamily(x.f, "default/next")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addrOf(t, r.IP)).To(Equal(want))
		}
		r, err := p.AllocateNextFamily(x.f, "default/wrapped")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrOf(t, r.IP)).To(Equal(x.window[0]), "after wrapping around")
	})
}

func pinReleaseUnheld(t *testing.T) {
	both(t, func(t *testing.T, x fam) {
		g := NewWithT(t)
		p, c := pair(t)
		g.Expect(p.AllocateIP(ipOf(x.window[0]), "default/pod")).To(Succeed())
		g.Expect(c.AllocateIP(x.window[0], "default/pod", pool)).To(Succeed())
		g.Expect(p.ReleaseIP(ipOf(x.window[0]))).To(Succeed())
		g.Expect(c.ReleaseIP(x.window[0], pool)).To(Succeed())
		p.BlacklistIP(ipOf(x.window[5]), "blacklist")
		c.ExcludeIP(x.window[5], "blacklist", pool)

		for _, a := range []netip.Addr{x.window[3], x.window[0], x.window[5], x.network, x.last, x.outside[3]} {
			g.Expect(c.ReleaseIP(a, pool)).To(Succeed(), "cilium ReleaseIP(%s)", a)
			g.Expect(p.ReleaseIP(ipOf(a))).To(MatchError(ipam.ErrNotAllocated), "our ReleaseIP(%s)", a)
			g.Expect(p.ReleaseIPString(a.String())).To(MatchError(ipam.ErrNotAllocated), "our ReleaseIPString(%s)", a)
		}
		g.Expect(heldBy(t, c)).To(BeEmpty())
		g.Expect(oursHeld(t, p)).To(BeEmpty())
	})
}

func pinReleaseOwnerNothing(t *testing.T) {
	g := NewWithT(t)
	p, c := pair(t)
	g.Expect(p.ReleaseIPString("default/nobody")).To(MatchError(ipam.ErrNotAllocated))
	g.Expect(c.releaseOwner(t, "default/nobody")).To(Succeed())

	// An owner that holds addresses: both release all of them.
	x := famOf(ipam.IPv4)
	_, _, err := p.AllocateNext("", "default/pod")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.AllocateIP(ipOf(x.window[5]), "default/pod")).To(Succeed())
	_, _, err = c.AllocateNext("", "default/pod", pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.AllocateIP(x.window[5], "default/pod", pool)).To(Succeed())
	g.Expect(heldBy(t, c)).To(HaveLen(3))
	g.Expect(p.ReleaseIPString("default/pod")).To(Succeed())
	g.Expect(c.releaseOwner(t, "default/pod")).To(Succeed())
	g.Expect(oursHeld(t, p)).To(BeEmpty())
	g.Expect(heldBy(t, c)).To(BeEmpty())
}

func pinRefusedResult(t *testing.T) {
	g := NewWithT(t)
	p, c := pair(t)
	fill(t, p, c, ipam.IPv4)
	before := heldBy(t, c)
	v4, v6, err := c.AllocateNext("", "default/both", pool)
	g.Expect(ciliumClass(err)).To(Equal(full))
	g.Expect(v4).To(BeNil())
	g.Expect(v6).NotTo(BeNil(), "the IPv6 result Cilium took and released")
	g.Expect(heldBy(t, c)).To(Equal(before), "and released it is")
	o4, o6, err := p.AllocateNext("", "default/both")
	g.Expect(err).To(MatchError(ipalloc.ErrPoolExhausted))
	g.Expect(o4).To(BeNil())
	g.Expect(o6).To(BeNil())
}

func pinExcludedInDump(t *testing.T) {
	both(t, func(t *testing.T, x fam) {
		g := NewWithT(t)
		p, c := pair(t)
		last := x.window[len(x.window)-1]
		for _, a := range x.window[:len(x.window)-1] {
			p.BlacklistIP(ipOf(a), "blacklist")
			c.ExcludeIP(a, "blacklist", pool)
		}
		r, err := p.AllocateNextFamily(x.f, "default/pod")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrOf(t, r.IP)).To(Equal(last))
		cr, err := c.AllocateNextFamily(ciliumipam.Family(x.f), "default/pod", pool)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cr.IP).To(Equal(last))
		// Cilium's next AllocateNext takes every excluded address left
		// before it is full; each stays allocated as excluded.
		_, err = c.AllocateNextFamily(ciliumipam.Family(x.f), "default/again", pool)
		g.Expect(err).To(MatchError(ipallocator.ErrFull))
		_, err = p.AllocateNextFamily(x.f, "default/again")
		g.Expect(err).To(MatchError(ipalloc.ErrPoolExhausted))
		held := heldBy(t, c)
		g.Expect(held).To(HaveLen(len(x.window)))
		g.Expect(held).To(HaveKeyWithValue(last, "default/pod"))
		for _, a := range x.window[:len(x.window)-1] {
			g.Expect(held[a]).To(HaveSuffix(" (excluded)"), "cilium holds %s", a)
		}
		d, status := allocatorOf(p, x.f).Dump()
		g.Expect(d).To(Equal(map[string]string{last.String(): "default/pod"}))
		g.Expect(status).To(ContainSubstring("%s: 1/1 allocated, 11 excluded", x.prefix))

		// Cilium's release of an excluded address frees it (nil); ours has
		// nothing to release there.
		g.Expect(c.ReleaseIP(x.window[0], pool)).To(Succeed())
		g.Expect(heldBy(t, c)).NotTo(HaveKey(x.window[0]))
		g.Expect(p.ReleaseIP(ipOf(x.window[0]))).To(MatchError(ipam.ErrNotAllocated))
	})
}

func pinTimerOnUnheld(t *testing.T) {
	bubble(t, func(t *testing.T) {
		g := NewWithT(t)
		p, c := pair(t)
		x := famOf(ipam.IPv4)
		a := x.window[0]
		for _, u := range []netip.Addr{a, x.window[1], x.outside[3], x.gateway} {
			id, err := c.StartExpirationTimer(u, pool, minute)
			g.Expect(err).NotTo(HaveOccurred(), "cilium StartExpirationTimer(%s)", u)
			g.Expect(id).NotTo(BeEmpty())
			_, err = p.StartExpirationTimer(ipOf(u), minute)
			g.Expect(err).To(MatchError(ipam.ErrNotAllocated), "our StartExpirationTimer(%s)", u)
		}
		// Another owner takes the address, asking for no timer: Cilium's
		// timer releases its allocation.
		g.Expect(c.AllocateIP(a, "default/later", pool)).To(Succeed())
		g.Expect(p.AllocateIP(ipOf(a), "default/later")).To(Succeed())
		// An AllocateNextWithExpiration that picks x.window[1], the only
		// address free: Cilium refuses (the timer there) and releases it.
		for _, b := range x.window[2:] {
			g.Expect(c.AllocateIP(b, "default/fill", pool)).To(Succeed())
			g.Expect(p.AllocateIP(ipOf(b), "default/fill")).To(Succeed())
		}
		_, _, err := c.AllocateNextWithExpiration("ipv4", "default/pod", pool, minute)
		g.Expect(ciliumClass(err)).To(Equal(timerExists), "%v", err)
		g.Expect(heldBy(t, c)).NotTo(HaveKey(x.window[1]))
		r4, _, err := p.AllocateNextWithExpiration("ipv4", "default/pod", minute)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrOf(t, r4.IP)).To(Equal(x.window[1]))

		time.Sleep(minute + time.Second)
		synctest.Wait()
		g.Expect(heldBy(t, c)).NotTo(HaveKey(a), "cilium: the timer started before default/later's allocation released it")
		g.Expect(c.dump(t)).NotTo(HaveKey(x.gateway), "cilium: and its router address")
		g.Expect(oursHeld(t, p)).To(HaveKeyWithValue(a, "default/later"))
		g.Expect(oursHeld(t, p)).NotTo(HaveKey(x.window[1]), "ours: default/pod's own timer fired")
	})
}

func pinStopOnUnheld(t *testing.T) {
	both(t, func(t *testing.T, x fam) {
		g := NewWithT(t)
		p, c := pair(t)
		for _, u := range []netip.Addr{x.window[0], x.outside[0]} {
			g.Expect(ciliumClass(c.StopExpirationTimer(u, pool, "an-id"))).To(Equal(timerMismatch))
			g.Expect(p.StopExpirationTimer(ipOf(u), "an-id")).To(MatchError(ipam.ErrNotAllocated))
		}
		// An allocation without a timer: both refuse alike.
		g.Expect(c.AllocateIP(x.window[0], "default/pod", pool)).To(Succeed())
		g.Expect(p.AllocateIP(ipOf(x.window[0]), "default/pod")).To(Succeed())
		g.Expect(ciliumClass(c.StopExpirationTimer(x.window[0], pool, "an-id"))).To(Equal(timerMismatch))
		g.Expect(p.StopExpirationTimer(ipOf(x.window[0]), "an-id")).To(MatchError(ipam.ErrReservationMismatch))
	})
}

func pinResultFields(t *testing.T) {
	g := NewWithT(t)
	p, c := pair(t)
	o4, o6, err := p.AllocateNext("", "default/pod")
	g.Expect(err).NotTo(HaveOccurred())
	c4, c6, err := c.AllocateNext("", "default/pod", pool)
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range []*ciliumipam.AllocationResult{c4, c6} {
		g.Expect(r.IP.IsValid()).To(BeTrue())
		g.Expect(r.CIDRs).To(BeEmpty())
		g.Expect(r.GatewayIP.IsValid()).To(BeFalse())
		g.Expect(r.IPPoolName).To(Equal(pool))
	}
	x4, x6 := famOf(ipam.IPv4), famOf(ipam.IPv6)
	g.Expect(o4.CIDRs).To(Equal([]string{x4.prefix.String()}))
	g.Expect(o4.GatewayIP).To(Equal(x4.gateway.String()))
	g.Expect(o6.CIDRs).To(Equal([]string{x6.prefix.String()}))
	g.Expect(o6.GatewayIP).To(Equal(x6.gateway.String()))
}

func pinPools(t *testing.T) {
	g := NewWithT(t)
	_, has := reflect.TypeFor[ciliumipam.AllocationResult]().FieldByName("IPPoolName")
	g.Expect(has).To(BeTrue())
	_, has = reflect.TypeFor[ipam.AllocationResult]().FieldByName("IPPoolName")
	g.Expect(has).To(BeFalse())
	for _, m := range []string{"AllocateIP", "AllocateNext", "AllocateNextWithExpiration", "ReleaseIP", "StartExpirationTimer", "StopExpirationTimer"} {
		cm, ok := reflect.TypeFor[*ciliumipam.IPAM]().MethodByName(m)
		g.Expect(ok).To(BeTrue(), m)
		om, ok := reflect.TypeFor[*ipam.Plugin]().MethodByName(m)
		g.Expect(ok).To(BeTrue(), m)
		g.Expect(cm.Type.NumIn()).To(Equal(om.Type.NumIn()+1), "%s: Cilium's takes a pool more", m)
		pools := 0
		for i := range cm.Type.NumIn() {
			if cm.Type.In(i) == reflect.TypeFor[ciliumipam.Pool]() {
				pools++
			}
		}
		g.Expect(pools).To(Equal(1), m)
	}
	g.Expect(pool).To(Equal(ciliumipam.Pool("default")))
}

func pinMissingFamily(t *testing.T) {
	g := NewWithT(t)
	p := newOurs(t, ipv4Only, inMemory)
	checkSubnets(t, p, podV4, netip.Prefix{})
	c := newCilium(podV4, netip.Prefix{})
	for _, fam := range []string{"ipv6", "inet"} {
		c4, c6, err := c.AllocateNext(fam, "default/pod", pool)
		g.Expect(err).NotTo(HaveOccurred(), "cilium AllocateNext(%q)", fam)
		g.Expect(c4).To(BeNil())
		g.Expect(c6).To(BeNil())
		o4, o6, err := p.AllocateNext(fam, "default/pod")
		g.Expect(err).To(HaveOccurred(), "our AllocateNext(%q)", fam)
		g.Expect(o4).To(BeNil())
		g.Expect(o6).To(BeNil())
		if fam == "ipv6" {
			g.Expect(err).To(MatchError(ipam.ErrIPv6Disabled))
		} else {
			g.Expect(ourClass(err)).To(Equal(badArgument), "%v", err)
		}
	}
	// AllocateNextFamily: Cilium reads the family's allocator for its
	// capacity metric before it checks that there is one.
	g.Expect(func() { _, _ = c.AllocateNextFamily(ciliumipam.IPv6, "default/pod", pool) }).To(Panic())
	_, err := p.AllocateNextFamily(ipam.IPv6, "default/pod")
	g.Expect(err).To(MatchError(ipam.ErrIPv6Disabled))
	// AllocateIP: both refuse alike.
	a := famOf(ipam.IPv6).window[0]
	g.Expect(c.AllocateIP(a, "default/pod", pool)).To(MatchError(ciliumipam.ErrIPv6Disabled))
	g.Expect(p.AllocateIP(ipOf(a), "default/pod")).To(MatchError(ipam.ErrIPv6Disabled))
	g.Expect(heldBy(t, c)).To(BeEmpty())
	g.Expect(oursHeld(t, p)).To(BeEmpty())
}

func pinOwnerNames(t *testing.T) {
	g := NewWithT(t)
	p, c := pair(t)
	for _, owner := range []string{"", "10.1.0.20", "fd00::1", strings.Repeat("x", 257), "tab\there", "\xff"} {
		r, err := c.AllocateNextFamily(ciliumipam.IPv4, owner, pool)
		g.Expect(err).NotTo(HaveOccurred(), "cilium owner %q", owner)
		g.Expect(heldBy(t, c)).To(HaveKeyWithValue(r.IP, owner))
		_, err = p.AllocateNextFamily(ipam.IPv4, owner)
		g.Expect(ourClass(err)).To(Equal(badArgument), "our owner %q: %v", owner, err)
		g.Expect(p.AllocateIP(ipOf(famOf(ipam.IPv4).window[11]), owner)).To(MatchError(ContainSubstring("owner name")))
	}
	g.Expect(oursHeld(t, p)).To(BeEmpty())
}

func pinNonPositiveTimeout(t *testing.T) {
	bubble(t, func(t *testing.T) {
		g := NewWithT(t)
		p, c := pair(t)
		x := famOf(ipam.IPv4)
		for _, d := range []time.Duration{0, -time.Second} {
			a := x.window[0]
			g.Expect(c.AllocateIP(a, "default/pod", pool)).To(Succeed())
			g.Expect(p.AllocateIP(ipOf(a), "default/pod")).To(Succeed())
			_, err := c.StartExpirationTimer(a, pool, d)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = p.StartExpirationTimer(ipOf(a), d)
			g.Expect(ourClass(err)).To(Equal(badArgument), "%v", err)
			time.Sleep(time.Millisecond)
			synctest.Wait()
			g.Expect(heldBy(t, c)).NotTo(HaveKey(a), "cilium: a timeout of %s releases at once", d)
			g.Expect(oursHeld(t, p)).To(HaveKey(a))
			g.Expect(p.ReleaseIP(ipOf(a))).To(Succeed())
		}
		// AllocateNextWithExpiration: negative, at once in Cilium, refused
		// in ours; 0, no timer in either.
		c4, _, err := c.AllocateNextWithExpiration("ipv4", "default/pod", pool, -time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		time.Sleep(time.Millisecond)
		synctest.Wait()
		g.Expect(heldBy(t, c)).NotTo(HaveKey(c4.IP))
		_, _, err = p.AllocateNextWithExpiration("ipv4", "default/pod", -time.Second)
		g.Expect(ourClass(err)).To(Equal(badArgument), "%v", err)
		g.Expect(oursHeld(t, p)).To(BeEmpty())
		c4, _, err = c.AllocateNextWithExpiration("ipv4", "default/pod", pool, 0)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c4.ExpirationUUID).To(BeEmpty())
		o4, _, err := p.AllocateNextWithExpiration("ipv4", "default/pod", 0)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o4.ExpirationUUID).To(BeEmpty())
		time.Sleep(time.Hour)
		synctest.Wait()
		g.Expect(heldBy(t, c)).To(HaveKey(c4.IP))
		g.Expect(oursHeld(t, p)).To(HaveKey(addrOf(t, o4.IP)))
	})
}

func pinIPv6RangeCap(t *testing.T) {
	g := NewWithT(t)
	p := newOurs(t, cap64, inMemory)
	pod := netip.MustParsePrefix("fd00:10:0:1::/64")
	checkSubnets(t, p, netip.MustParsePrefix("10.1.1.0/24"), pod)
	c := newCilium(netip.Prefix{}, pod)

	g.Expect(ipallocator.RangeSize(pod)).To(Equal(int64(1 << 16)))
	for _, s := range []string{"fd00:10:0:1::fffe", "fd00:10:0:1::ffff", "fd00:10:0:1::1:0", "fd00:10:0:1:ffff:ffff:ffff:fffd"} {
		a := netip.MustParseAddr(s)
		g.Expect(p.AllocateIP(ipOf(a), "default/pod")).To(Succeed(), "our AllocateIP(%s)", a)
		cerr := c.AllocateIP(a, "default/pod", pool)
		if s == "fd00:10:0:1::fffe" {
			g.Expect(cerr).NotTo(HaveOccurred(), "the last address of Cilium's Range")
			continue
		}
		g.Expect(ciliumClass(cerr)).To(Equal(outOfRange), "cilium AllocateIP(%s)", a)
	}
}

func pinCooldown(t *testing.T) {
	g := NewWithT(t)
	p := newOursWith(t, dualStack, inMemory, func(*ipam.Config) {}) // the default cooldown
	c := newCilium(podV4, podV6)
	x := famOf(ipam.IPv4)
	c.reserveRouter(t, x)
	// Every address held; then two released, window[1] first.
	for _, a := range x.window {
		g.Expect(p.AllocateIP(ipOf(a), "default/pod")).To(Succeed())
		g.Expect(c.AllocateIP(a, "default/pod", pool)).To(Succeed())
	}
	for _, a := range []netip.Addr{x.window[1], x.window[0]} {
		g.Expect(p.ReleaseIP(ipOf(a))).To(Succeed())
		g.Expect(c.ReleaseIP(a, pool)).To(Succeed())
	}
	_, status := allocatorOf(p, x.f).Dump()
	g.Expect(status).To(ContainSubstring("2 cooling down"))
	// Cilium: both free again at once.
	g.Expect(c.AllocateIP(x.window[0], "default/other", pool)).To(Succeed())
	g.Expect(c.ReleaseIP(x.window[0], pool)).To(Succeed())
	// Ours: no address is free but cooling ones: the one whose cooldown
	// ends first (window[1], released first), not the next-fit one.
	r, err := p.AllocateNextFamily(x.f, "default/other")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(addrOf(t, r.IP)).To(Equal(x.window[1]))
}

// TestPerAddressTimersAgree: each address of an
// AllocateNextWithExpiration("") has its own timer on both sides: its own
// ID, stopped, started and expiring alone.
func TestPerAddressTimersAgree(t *testing.T) {
	bubble(t, func(t *testing.T) {
		g := NewWithT(t)
		s := newSeq(t, onBolt)
		s.step(op{kind: opNext, call: "AllocateNextWithExpiration", owner: "default/pod", timeout: minute})
		g.Expect(s.timers).To(HaveLen(2))
		x4, x6 := s.fams[ipam.IPv4], s.fams[ipam.IPv6]
		a4, a6 := x4.window[0], x6.window[0]
		t4, t6 := s.timers[a4], s.timers[a6]
		g.Expect(t4.ours).NotTo(Equal(t6.ours))
		g.Expect(t4.cil).NotTo(Equal(t6.cil))

		// The IPv4 ID does not stop the IPv6 timer; it stops the IPv4 one.
		g.Expect(ourClass(s.p.StopExpirationTimer(ipOf(a6), t4.ours))).To(Equal(timerMismatch))
		g.Expect(ciliumClass(s.c.StopExpirationTimer(a6, pool, t4.cil))).To(Equal(timerMismatch))
		s.step(op{kind: opStop, call: "StopExpirationTimer", addr: a4, tgt: "held", id: "right"})
		g.Expect(s.timers).NotTo(HaveKey(a4))
		// The IPv6 address still has its own: a second is refused, the
		// IPv4 one may have a new one.
		_, oerr := s.p.StartExpirationTimer(ipOf(a6), minute)
		_, cerr := s.c.StartExpirationTimer(a6, pool, minute)
		g.Expect(ourClass(oerr)).To(Equal(timerExists))
		g.Expect(ciliumClass(cerr)).To(Equal(timerExists))
		g.Expect(ourClass(s.p.StopExpirationTimer(ipOf(a4), t4.ours))).To(Equal(timerMismatch), "stopped already")
		g.Expect(ciliumClass(s.c.StopExpirationTimer(a4, pool, t4.cil))).To(Equal(timerMismatch), "stopped already")

		// The IPv6 timer fires: the IPv6 address alone goes.
		s.step(op{kind: opAdvance, call: "time passes", d: 90 * time.Second})
		g.Expect(s.held).To(Equal(map[netip.Addr]string{a4: "default/pod"}))
		s.step(op{kind: opStart, call: "StartExpirationTimer", addr: a4, tgt: "held", timeout: minute})
		g.Expect(s.timers).To(HaveKey(a4))
		// A release stops the timer on both sides.
		s.step(op{kind: opRelease, call: "ReleaseIP", addr: a4, tgt: "held"})
		s.step(op{kind: opAllocate, call: "AllocateIP", addr: a4, tgt: "free", owner: "default/other"})
		s.step(op{kind: opAdvance, call: "time passes", d: 5 * minute})
		g.Expect(s.held).To(Equal(map[netip.Addr]string{a4: "default/other"}))
	})
}

// TestReleaseIPOfOneFamilyAgrees: ReleaseIP of one address of an
// AllocateNext("") releases that address only, on both sides.
func TestReleaseIPOfOneFamilyAgrees(t *testing.T) {
	g := NewWithT(t)
	s := newSeq(t, onBolt)
	s.step(op{kind: opNext, call: "AllocateNext", owner: "default/pod"})
	a4, a6 := s.fams[ipam.IPv4].window[0], s.fams[ipam.IPv6].window[0]
	g.Expect(s.held).To(Equal(map[netip.Addr]string{a4: "default/pod", a6: "default/pod"}))
	s.step(op{kind: opRelease, call: "ReleaseIP", addr: a4, tgt: "held"})
	g.Expect(s.held).To(Equal(map[netip.Addr]string{a6: "default/pod"}))
	s.step(op{kind: opRelease, call: "ReleaseIP", addr: a6, tgt: "held"})
	g.Expect(s.held).To(BeEmpty())
}

// TestAllocateNextBothFamiliesIsAllOrNothing runs AllocateNext("") on both
// sides with one family, the other or both full: both refuse and neither
// keeps an address of the family that had one free. Cilium allocates
// IPv6 first and releases it when IPv4 fails; ours takes the primary
// family (IPv4) first and rolls it back, its next-fit cursor included,
// when IPv6 fails.
func TestAllocateNextBothFamiliesIsAllOrNothing(t *testing.T) {
	rows := []struct {
		name         string
		fill4, fill6 bool
	}{
		{"neither full: both get one of each", false, false},
		{"IPv4 full", true, false},
		{"IPv6 full", false, true},
		{"both full", true, true},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newSeq(t, inMemory)
			for f, on := range map[ipam.Family]bool{ipam.IPv4: row.fill4, ipam.IPv6: row.fill6} {
				for i := range s.fams[f].window {
					if on {
						s.step(op{kind: opNext, call: "AllocateNextFamily", family: string(f), owner: fmt.Sprintf("default/fill-%d", i)})
					}
				}
			}
			before := copyHeld(s.held)
			s.step(op{kind: opNext, call: "AllocateNext", owner: "default/both"})
			if !row.fill4 && !row.fill6 {
				g.Expect(s.held).To(HaveLen(len(before) + 2))
				return
			}
			g.Expect(s.held).To(Equal(before), "nothing of the refused call is left")
			if !row.fill4 {
				// The rolled-back IPv4 address is our next one (step checks
				// next-fit against the unmoved cursor).
				s.step(op{kind: opNext, call: "AllocateNextFamily", family: "ipv4", owner: "default/after"})
				g.Expect(s.held).To(HaveKeyWithValue(s.fams[ipam.IPv4].window[0], "default/after"))
			}
		})
	}
}

// copyHeld copies m.
func copyHeld(m map[netip.Addr]string) map[netip.Addr]string {
	out := make(map[netip.Addr]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
