package ciliumdiff

import (
	"fmt"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/cilium/cilium/pkg/ipam/service/ipallocator"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

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

// TestDifferencesOnPurpose pins, one subtest each, where our allocation
// surface and Cilium's allocator code differ, with the smallest scenario
// that shows it, and asserts both sides' behaviour. The numbers are those
// of doc.go. Our side keeps its allocations in a bolt file here.
func TestDifferencesOnPurpose(t *testing.T) {
	// Cilium's Range leaves out only the network address and the last
	// one (ErrNotInRange): its first AllocateNext hands out host 1, which
	// Cilium's agent keeps for the router by allocating it itself (owner
	// "router"), an allocation like any other that a release frees. Ours
	// never hands out host 1 (the pod gateway) nor the address before the
	// last (the NAT loopback): they are outside the pool's window, and
	// Allocate of any of the four is ErrReserved.
	t.Run("D1 the gateway and the NAT loopback: Cilium's Range hands them out, ours never; the four reserved addresses are ErrReserved in ours", func(t *testing.T) {
		both(t, func(t *testing.T, x fam) {
			g := NewWithT(t)
			p := newOurs(t, dualStack, onBolt)
			ours := allocatorOf(p, x.f)
			c := newCilium(podV4, podV6)

			a, err := c.allocateNextFamily(x.f, "router")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(x.gateway))
			g.Expect(c.allocateIP(x.f, x.natLoop, "default/pod")).To(Succeed())
			g.Expect(c.releaseIP(x.f, x.gateway)).To(Succeed())
			a, err = c.allocateNextFamily(x.f, "default/other")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(x.gateway), "the released gateway is the first free address again")

			res, err := ours.AllocateNext("router")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addrOf(t, res.IP)).To(Equal(x.window[0]))
			g.Expect(res.GatewayIP).To(Equal(x.gateway.String()))
			for _, r := range []netip.Addr{x.gateway, x.natLoop, x.network, x.last} {
				_, err = ours.Allocate(ipOf(r), "default/pod")
				g.Expect(err).To(MatchError(ipalloc.ErrReserved), "Allocate(%s)", r)
				g.Expect(ours.Release(ipOf(r))).To(MatchError(ipam.ErrNotAllocated), "Release(%s)", r)
			}
			// Cilium: the network address and the last one are not in its
			// Range.
			for _, r := range []netip.Addr{x.network, x.last} {
				g.Expect(ciliumClass(c.allocateIP(x.f, r, "default/pod"))).To(Equal(outOfRange))
			}
			// Filling both: Cilium hands out two addresses more.
			n := 1
			for ; ; n++ {
				if _, err := ours.AllocateNext(fmt.Sprintf("default/p%d", n)); err != nil {
					g.Expect(err).To(MatchError(ipalloc.ErrPoolExhausted))
					break
				}
			}
			m := 2
			for ; ; m++ {
				if _, err := c.allocateNextFamily(x.f, fmt.Sprintf("default/p%d", m)); err != nil {
					g.Expect(err).To(MatchError(ipallocator.ErrFull))
					break
				}
			}
			g.Expect(n).To(Equal(len(x.window)))
			g.Expect(m).To(Equal(len(x.window) + 2))
		})
	})

	// Cilium's hostScopeAllocator hands out a random free address
	// (NewCIDRRange's random scan); the contiguous map this module uses
	// for it hands out the lowest. Ours is next-fit: the first free after
	// the last handed out, wrapping, so a released address waits a whole
	// round (a crash-looping pod does not get its predecessor's address).
	// Before the first release all three agree on the order.
	t.Run("D2 after a release: Cilium first-fit gives the lowest free address, ours the next after the last one handed out", func(t *testing.T) {
		both(t, func(t *testing.T, x fam) {
			g := NewWithT(t)
			p := newOurs(t, dualStack, onBolt)
			ours := allocatorOf(p, x.f)
			c := newCilium(podV4, podV6)
			reserve(t, c, x)

			for i := range 3 {
				res, err := ours.AllocateNext("default/pod")
				g.Expect(err).NotTo(HaveOccurred())
				a, err := c.allocateNextFamily(x.f, "default/pod")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(addrOf(t, res.IP)).To(Equal(a))
				g.Expect(a).To(Equal(x.window[i]))
			}
			g.Expect(ours.Release(ipOf(x.window[0]))).To(Succeed())
			g.Expect(c.releaseIP(x.f, x.window[0])).To(Succeed())

			a, err := c.allocateNextFamily(x.f, "default/next")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(x.window[0]))
			for _, want := range x.window[3:] {
				res, err := ours.AllocateNext("default/next")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(addrOf(t, res.IP)).To(Equal(want))
			}
			res, err := ours.AllocateNext("default/wrapped")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addrOf(t, res.IP)).To(Equal(x.window[0]), "after wrapping around")
		})
	})

	// AllocateNext("") when the second family is full: ours takes the
	// primary family's address first and gives it back, cursor included
	// (the rollback leaves the pool as it was); Cilium takes IPv6 first
	// and never touches IPv4. Both hand out the same IPv4 address next.
	t.Run("an IPv4 address rolled back by AllocateNext(\"\") is the next one in both", func(t *testing.T) {
		g := NewWithT(t)
		s := newPair(t, ipam.IPv6, onBolt)
		for i := range s.fam.window {
			s.step(op{kind: opNext, owner: fmt.Sprintf("default/fill-%d", i)})
		}
		v4, v6, err := s.p.AllocateNext("", "default/both")
		g.Expect(err).To(MatchError(ipalloc.ErrPoolExhausted))
		g.Expect(v4).To(BeNil())
		g.Expect(v6).To(BeNil())
		c4, c6, err := s.c.allocateNext("", "default/both")
		g.Expect(err).To(MatchError(ipallocator.ErrFull))
		g.Expect(c4.IsValid() || c6.IsValid()).To(BeFalse())

		x := famOf(ipam.IPv4)
		a, err := s.c.allocateNextFamily(ipam.IPv4, "default/after")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a).To(Equal(x.window[0]))
		res, err := s.p.IPv4Allocator().AllocateNext("default/after")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrOf(t, res.IP)).To(Equal(x.window[0]))
	})

	// Range.Release is a no-op for an address that is not allocated, and
	// IPAM.ReleaseIP returns nil for it. Ours says so: ErrNotAllocated,
	// for a free address, one released twice, an excluded one, the
	// network address and one outside the pod subnet.
	t.Run("D3 release of an address nobody holds: Cilium nil, ours ErrNotAllocated", func(t *testing.T) {
		both(t, func(t *testing.T, x fam) {
			g := NewWithT(t)
			p := newOurs(t, dualStack, onBolt)
			ours := allocatorOf(p, x.f)
			c := newCilium(podV4, podV6)
			reserve(t, c, x)

			res, err := ours.AllocateNext("default/pod")
			g.Expect(err).NotTo(HaveOccurred())
			held := addrOf(t, res.IP)
			g.Expect(c.allocateIP(x.f, held, "default/pod")).To(Succeed())
			g.Expect(ours.Release(res.IP)).To(Succeed())
			g.Expect(c.releaseIP(x.f, held)).To(Succeed())
			p.BlacklistIP(ipOf(x.window[5]), "blacklist")
			c.excludeIP(x.window[5], "blacklist")

			for _, a := range []netip.Addr{x.window[3], held, x.window[5], x.network, x.outside[3]} {
				g.Expect(c.releaseIP(x.f, a)).To(Succeed(), "cilium Release(%s)", a)
				g.Expect(ours.Release(ipOf(a))).To(MatchError(ipam.ErrNotAllocated), "our Release(%s)", a)
				g.Expect(p.ReleaseIP(ipOf(a))).To(MatchError(ipam.ErrNotAllocated), "our ReleaseIP(%s)", a)
			}
		})
	})

	// An owner-keyed allocation of AllocateNext("") holds one address of
	// each family, and ReleaseIP of either gives both back: one
	// allocation, released whole, as a pod's dual-stack attachment is.
	// Cilium keeps one allocation per address: ReleaseIP of the IPv4 one
	// leaves the IPv6 one held. The per-family sequences never meet this:
	// an Allocator's allocations hold one family.
	t.Run("D4 ReleaseIP of one address of an AllocateNext(\"\") allocation: ours releases both families, Cilium one", func(t *testing.T) {
		g := NewWithT(t)
		p := newOurs(t, dualStack, onBolt)
		c := newCilium(podV4, podV6)
		x4, x6 := famOf(ipam.IPv4), famOf(ipam.IPv6)
		reserve(t, c, x4)
		reserve(t, c, x6)

		o4, o6, err := p.AllocateNext("", "default/pod")
		g.Expect(err).NotTo(HaveOccurred())
		c4, c6, err := c.allocateNext("", "default/pod")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrOf(t, o4.IP)).To(Equal(c4))
		g.Expect(addrOf(t, o6.IP)).To(Equal(c6))

		g.Expect(p.ReleaseIP(o4.IP)).To(Succeed())
		g.Expect(c.releaseIP(ipam.IPv4, c4)).To(Succeed())
		d4, d6, _ := p.Dump()
		g.Expect(d4).To(BeEmpty())
		g.Expect(d6).To(BeEmpty())
		g.Expect(c.dump(ipam.IPv6)).To(HaveKeyWithValue(c6, "default/pod"))
		g.Expect(c.dump(ipam.IPv4)).NotTo(HaveKey(c4))
		// The IPv6 address of the released allocation is free in ours.
		g.Expect(p.ReleaseIP(o6.IP)).To(MatchError(ipam.ErrNotAllocated))
	})

	// Cilium only records an excluded address (ExcludeIP, BlacklistIP in
	// the Cilium our API follows); allocateNextFamily takes the Range's
	// next address until one is not excluded and keeps the excluded ones
	// it took allocated, owned by "<owner> (excluded)", so Dump lists them.
	// Ours takes a free excluded address out of the pool at once (held by
	// an exclusion, which Dump does not list; its status counts it): the
	// addresses handed out are the same.
	t.Run("D5 AllocateNext meets an excluded address: Cilium keeps it allocated as excluded, ours holds it out of Dump", func(t *testing.T) {
		both(t, func(t *testing.T, x fam) {
			g := NewWithT(t)
			p := newOurs(t, dualStack, onBolt)
			ours := allocatorOf(p, x.f)
			c := newCilium(podV4, podV6)
			reserve(t, c, x)

			p.BlacklistIP(ipOf(x.window[0]), "blacklist")
			c.excludeIP(x.window[0], "blacklist")
			res, err := ours.AllocateNext("default/pod")
			g.Expect(err).NotTo(HaveOccurred())
			a, err := c.allocateNextFamily(x.f, "default/pod")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addrOf(t, res.IP)).To(Equal(x.window[1]))
			g.Expect(a).To(Equal(x.window[1]))

			g.Expect(c.dump(x.f)).To(HaveKeyWithValue(x.window[0], "default/pod (excluded)"))
			d, status := ours.Dump()
			g.Expect(d).To(Equal(map[string]string{x.window[1].String(): "default/pod"}))
			g.Expect(status).To(ContainSubstring("%s: 1/11 allocated, 1 excluded", x.prefix))

			// Cilium's release of the excluded address frees it (nil, like
			// any release) and its next AllocateNext takes it again as
			// excluded; ours has nothing to release there.
			g.Expect(c.releaseIP(x.f, x.window[0])).To(Succeed())
			g.Expect(c.dump(x.f)).NotTo(HaveKey(x.window[0]))
			a, err = c.allocateNextFamily(x.f, "default/again")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(x.window[2]))
			g.Expect(c.dump(x.f)).To(HaveKeyWithValue(x.window[0], "default/again (excluded)"))
			g.Expect(ours.Release(ipOf(x.window[0]))).To(MatchError(ipam.ErrNotAllocated))
		})
	})

	// An address excluded while it is allocated: both keep the
	// allocation, refuse Allocate of it while it is held and after it is
	// released (excluded, checked before taken), and never hand it out
	// again.
	t.Run("D5 an allocated address is blacklisted: both keep it, neither hands it out after its release (the same on both)", func(t *testing.T) {
		both(t, func(t *testing.T, x fam) {
			g := NewWithT(t)
			s := newPair(t, x.f, onBolt)
			s.step(op{kind: opNext, owner: "default/pod"})
			a := x.window[0]
			g.Expect(s.held).To(HaveKeyWithValue(a, "default/pod"))
			s.step(op{kind: opBlacklist, tgt: "held", addr: a, owner: "blacklist"})
			g.Expect(s.held).To(HaveKeyWithValue(a, "default/pod"))

			_, oerr := s.ours.Allocate(ipOf(a), "default/other")
			g.Expect(oerr).To(MatchError(ipam.ErrExcluded))
			g.Expect(ciliumClass(s.c.allocateIP(x.f, a, "default/other"))).To(Equal(excluded))

			s.step(op{kind: opRelease, tgt: "held", addr: a})
			g.Expect(s.held).To(BeEmpty())
			s.step(op{kind: opAllocate, tgt: "excluded", addr: a, owner: "default/other"})
			g.Expect(s.held).To(BeEmpty())
			// Every other address once, then both are exhausted: the
			// excluded one is never handed out.
			for range len(x.window) - 1 {
				s.step(op{kind: opNext, owner: "default/fill"})
			}
			g.Expect(s.held).NotTo(HaveKey(a))
			s.step(op{kind: opNext, owner: "default/one-too-many"})
			g.Expect(s.held).To(HaveLen(len(x.window) - 1))
		})
	})

	// An exclusion of an address ours never hands out anyway (the
	// gateway, the NAT loopback, the network and last addresses, one
	// outside the pod subnet) changes nothing in ours: Allocate of it is
	// still ErrReserved, or ErrOutOfRange outside the subnet, and the
	// status counts no exclusion. Cilium checks its exclusions before the
	// Range: excluded.
	t.Run("D5 an exclusion of an address ours never hands out: Cilium refuses it as excluded, ours as reserved or out of range", func(t *testing.T) {
		both(t, func(t *testing.T, x fam) {
			g := NewWithT(t)
			p := newOurs(t, dualStack, onBolt)
			ours := allocatorOf(p, x.f)
			c := newCilium(podV4, podV6)
			reserve(t, c, x)
			for _, a := range []netip.Addr{x.gateway, x.natLoop, x.network, x.last, x.outside[0]} {
				p.BlacklistIP(ipOf(a), "blacklist")
				c.excludeIP(a, "blacklist")
				_, err := ours.Allocate(ipOf(a), "default/pod")
				want := ipalloc.ErrReserved
				if a == x.outside[0] {
					want = ipalloc.ErrOutOfRange
				}
				g.Expect(err).To(MatchError(want), "our Allocate(%s)", a)
				g.Expect(ciliumClass(c.allocateIP(x.f, a, "default/pod"))).To(Equal(excluded), "cilium Allocate(%s)", a)
			}
			_, status := ours.Dump()
			g.Expect(status).To(ContainSubstring("%s: 0/12 allocated, 0 excluded", x.prefix))
		})
	})

	// ipallocator.RangeSize caps an IPv6 range at 2^16 addresses (the
	// bitmap is a big.Int); NewCIDRRange of a /64 covers its first 65536
	// addresses only, less the first (and the last of those). Ours hands
	// out the whole /64 (ipalloc's sparse bitmap, 64-bit offsets).
	t.Run("D6 an IPv6 /64 pod subnet: Cilium's Range covers its first 2^16 addresses, ours all of it", func(t *testing.T) {
		g := NewWithT(t)
		p := newOurs(t, cap64, onBolt)
		pod := netip.MustParsePrefix("fd00:10:0:1::/64")
		checkSubnets(t, p, netip.MustParsePrefix("10.1.1.0/24"), pod)
		ours := p.IPv6Allocator()
		c := newCiliumFamily(pod)

		g.Expect(ipallocator.RangeSize(pod)).To(Equal(int64(1 << 16)))
		g.Expect(c.rng.Free()).To(Equal(1<<16 - 2))
		for _, a := range []netip.Addr{netip.MustParseAddr("fd00:10:0:1::fffe"), netip.MustParseAddr("fd00:10:0:1::ffff"),
			netip.MustParseAddr("fd00:10:0:1::1:0"), netip.MustParseAddr("fd00:10:0:1:ffff:ffff:ffff:fffd")} {
			_, err := ours.Allocate(ipOf(a), "default/pod")
			g.Expect(err).NotTo(HaveOccurred(), "our Allocate(%s)", a)
			cerr := c.rng.Allocate(a)
			if a == netip.MustParseAddr("fd00:10:0:1::fffe") {
				g.Expect(cerr).NotTo(HaveOccurred(), "the last address of Cilium's Range")
				continue
			}
			g.Expect(ciliumClass(cerr)).To(Equal(outOfRange), "cilium Allocate(%s)", a)
		}
		// Ours still has room at the very end of the /64; Cilium's
		// first AllocateNext is host 1, ours host 2 (D1).
		_, err := ours.Allocate(ipOf(netip.MustParseAddr("fd00:10:0:1:ffff:ffff:ffff:fffe")), "default/pod")
		g.Expect(err).To(MatchError(ipalloc.ErrReserved), "the NAT loopback of the /64")
		a, err := c.allocateNext()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a).To(Equal(netip.MustParseAddr("fd00:10:0:1::1")))
		res, err := ours.AllocateNext("default/pod")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrOf(t, res.IP)).To(Equal(netip.MustParseAddr("fd00:10:0:1::2")))
	})

	// A per-family Allocator given an address of the other family: in
	// Cilium it goes to that family's Range, which says ErrNotInRange
	// for Allocate (ours too: ErrOutOfRange) and does nothing for Release
	// (nil; ours ErrOutOfRange, as for any address it does not hold). The
	// plugin-level AllocateIP and ReleaseIP take either family.
	t.Run("D7 a per-family Allocator given the other family: Release is nil in Cilium, out of range in ours", func(t *testing.T) {
		both(t, func(t *testing.T, x fam) {
			g := NewWithT(t)
			p := newOurs(t, dualStack, onBolt)
			ours := allocatorOf(p, x.f)
			c := newCilium(podV4, podV6)

			_, err := ours.Allocate(ipOf(x.other), "default/pod")
			g.Expect(ourClass(err)).To(Equal(outOfRange), "%v", err)
			g.Expect(err).To(MatchError(ContainSubstring("is not %s", x.f)))
			g.Expect(ciliumClass(c.allocateIP(x.f, x.other, "default/pod"))).To(Equal(outOfRange))
			g.Expect(ourClass(ours.Release(ipOf(x.other)))).To(Equal(outOfRange))
			g.Expect(c.releaseIP(x.f, x.other)).To(Succeed())

			g.Expect(p.AllocateIP(ipOf(x.other), "default/pod")).To(Succeed())
			g.Expect(p.ReleaseIP(ipOf(x.other))).To(Succeed())
		})
	})
}

// allocatorOf is our per-family Allocator of f.
func allocatorOf(p *ipam.Plugin, f ipam.Family) ipam.Allocator {
	if f == ipam.IPv4 {
		return p.IPv4Allocator()
	}
	return p.IPv6Allocator()
}

// reserve holds x's gateway and NAT loopback on Cilium's side, as newPair
// does (D1).
func reserve(t testing.TB, c *ciliumIPAM, x fam) {
	t.Helper()
	for _, a := range []netip.Addr{x.gateway, x.natLoop} {
		if err := c.allocateIP(x.f, a, "reserved"); err != nil {
			t.Fatalf("cilium: reserve %s: %v", a, err)
		}
	}
}
