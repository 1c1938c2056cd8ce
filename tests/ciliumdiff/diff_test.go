package ciliumdiff

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

var (
	seqsFlag  = flag.Int("seqs", 100, "random sequences per family (seeds 1 to seqs)")
	stepsFlag = flag.Int("steps", 150, "operations per random sequence")
)

// fam is one family of node 1's pod subnet and the addresses the
// sequences aim at.
type fam struct {
	f                               ipam.Family
	prefix                          netip.Prefix
	network, gateway, natLoop, last netip.Addr
	window                          []netip.Addr // what ours hands out: gateway+1 to natLoop-1
	outside                         []netip.Addr // same family, outside the pod subnet
	other                           netip.Addr   // the other family, in its pod subnet
}

func famOf(f ipam.Family) fam {
	p, o := podV4, podV6
	outside := []netip.Addr{netip.MustParseAddr("10.1.0.15"), netip.MustParseAddr("10.1.0.32"),
		netip.MustParseAddr("10.1.255.254"), netip.MustParseAddr("192.0.2.1")}
	if f == ipam.IPv6 {
		p, o = podV6, podV4
		outside = []netip.Addr{netip.MustParseAddr("fd00:10:1::f"), netip.MustParseAddr("fd00:10:1::20"),
			netip.MustParseAddr("fd00:10:1:ffff::1"), netip.MustParseAddr("2001:db8::1")}
	}
	last := lastOf(p)
	x := fam{f: f, prefix: p, network: p.Addr(), gateway: nth(p, 1), natLoop: last.Prev(), last: last,
		outside: outside, other: nth(o, 2)}
	for a := x.gateway.Next(); a != x.natLoop; a = a.Next() {
		x.window = append(x.window, a)
	}
	return x
}

// opKind is what a step does.
type opKind int

const (
	opNext      opKind = iota // Allocator.AllocateNext
	opAllocate                // Allocator.Allocate
	opRelease                 // Allocator.Release
	opBlacklist               // Plugin.BlacklistIP, IPAM.ExcludeIP
)

// op is one step of a sequence; tgt names the kind of address it aims
// at (free, held, excluded, network, gateway, natLoop, last, outside,
// other).
type op struct {
	kind  opKind
	tgt   string
	addr  netip.Addr
	owner string
}

func (o op) String() string {
	switch o.kind {
	case opNext:
		return fmt.Sprintf("AllocateNext(%q)", o.owner)
	case opAllocate:
		return fmt.Sprintf("Allocate(%s [%s], %q)", o.addr, o.tgt, o.owner)
	case opRelease:
		return fmt.Sprintf("Release(%s [%s])", o.addr, o.tgt)
	}
	return fmt.Sprintf("BlacklistIP(%s [%s], %q)", o.addr, o.tgt, o.owner)
}

// The differences on purpose a sequence meets (see doc.go and
// differences_test.go); pair counts each one.
const (
	dReserved  = "D1 network, gateway, NAT loopback, last address: ours reserved; Cilium not in range, taken (pre-held) or excluded"
	dNextFit   = "D2 next-fit (ours) and first-fit (Cilium) pick different free addresses"
	dRelease   = "D3 release of an address nobody holds: Cilium nil, ours ErrNotAllocated"
	dExclOut   = "D5 an exclusion outside the pod subnet: Cilium refuses it as excluded, ours as out of range"
	dExclHeld  = "D5 Cilium holds an excluded address AllocateNext stepped over, ours holds none in Dump"
	dOtherFamR = "D7 release of an address of the other family: Cilium nil, ours out of range"
)

// pair is our plugin's Allocator of one family and Cilium's side, run
// in step, with the model both must agree with.
type pair struct {
	t    testing.TB
	fam  fam
	p    *ipam.Plugin
	ours ipam.Allocator
	c    *ciliumIPAM

	held     map[netip.Addr]string // the allocations (address -> owner) both hold
	excl     map[netip.Addr]bool   // the addresses blacklisted
	cursor   netip.Addr            // the last address our AllocateNext handed out
	releases int                   // successful releases so far
	met      map[string]int        // differences on purpose met
	exclHeld map[netip.Addr]bool   // excluded addresses Cilium's AllocateNext held
	agreed   map[string]int        // outcomes both sides gave, by call and target
}

// newPair starts both sides on node 1's dual-stack pod subnets. Cilium's
// side holds the gateway and the NAT loopback of both families (owner
// "reserved"), which ours never hands out, so that both have the same
// free addresses (D1).
func newPair(t testing.TB, f ipam.Family, st storage) *pair {
	t.Helper()
	p := newOurs(t, dualStack, st)
	checkSubnets(t, p, podV4, podV6)
	c := newCilium(podV4, podV6)
	reserve(t, c, famOf(ipam.IPv4))
	reserve(t, c, famOf(ipam.IPv6))
	ours := p.IPv4Allocator()
	if f == ipam.IPv6 {
		ours = p.IPv6Allocator()
	}
	return &pair{t: t, fam: famOf(f), p: p, ours: ours, c: c,
		held: map[netip.Addr]string{}, excl: map[netip.Addr]bool{}, met: map[string]int{},
		exclHeld: map[netip.Addr]bool{}, agreed: map[string]int{}}
}

// free reports whether a is in our window and neither held nor
// blacklisted.
func (s *pair) free(a netip.Addr) bool {
	_, held := s.held[a]
	return !held && !s.excl[a] && slices.Contains(s.fam.window, a)
}

// nextFit is the address our AllocateNext must hand out: the first free
// one after the cursor, wrapping around (invalid: none is free).
func (s *pair) nextFit() netip.Addr {
	w := s.fam.window
	start := 0
	if i := slices.Index(w, s.cursor); i >= 0 {
		start = i + 1
	}
	for k := range w {
		if a := w[(start+k)%len(w)]; s.free(a) {
			return a
		}
	}
	return netip.Addr{}
}

// firstFit is the address Cilium's first-fit AllocateNext hands out.
func (s *pair) firstFit() netip.Addr {
	for _, a := range s.fam.window {
		if s.free(a) {
			return a
		}
	}
	return netip.Addr{}
}

// step runs o on both sides, fails the test where they differ other than
// on purpose, and then compares what each holds.
func (s *pair) step(o op) {
	s.t.Helper()
	switch o.kind {
	case opNext:
		s.next(o)
	case opAllocate, opRelease:
		s.byAddress(o)
	case opBlacklist:
		s.p.BlacklistIP(ipOf(o.addr), o.owner)
		s.c.excludeIP(o.addr, o.owner)
		s.excl[o.addr] = true
	}
	s.compare(o)
}

// next runs AllocateNext: the same outcome on both sides; ours hands out
// the next-fit address, Cilium the first-fit one. Where those differ (only
// once something was released), Cilium's side is given ours instead
// (released and allocated by address) so that both keep holding the same
// addresses.
func (s *pair) next(o op) {
	t := s.t
	t.Helper()
	res, oerr := s.ours.AllocateNext(o.owner)
	ca, cerr := s.c.allocateNextFamily(s.fam.f, o.owner)
	oc, cc := ourClass(oerr), ciliumClass(cerr)
	if oc != cc {
		t.Fatalf("%s: cilium %s (%v, %v), ours %s (%v, %v)", o, cc, ca, cerr, oc, res, oerr)
	}
	s.agreed["AllocateNext: "+string(oc)]++
	want := s.nextFit()
	if oc != ok {
		if oc != full || want.IsValid() {
			t.Fatalf("%s: both %s (ours: %v), with %s free", o, oc, oerr, want)
		}
		return
	}
	oa := addrOf(t, res.IP)
	if !slices.Equal(res.CIDRs, []string{s.fam.prefix.String()}) || res.GatewayIP != s.fam.gateway.String() {
		t.Fatalf("%s: ours gave %s with CIDRs %v and gateway %s, want [%s] and %s", o, oa, res.CIDRs, res.GatewayIP,
			s.fam.prefix, s.fam.gateway)
	}
	if oa != want {
		t.Fatalf("%s: ours gave %s, next-fit after %s is %s (held %v, blacklisted %v)", o, oa, s.cursor, want,
			slices.SortedFunc(maps.Keys(s.held), netip.Addr.Compare), slices.SortedFunc(maps.Keys(s.excl), netip.Addr.Compare))
	}
	if ca != oa {
		if s.releases == 0 {
			t.Fatalf("%s: cilium gave %s, ours %s, before anything was released", o, ca, oa)
		}
		if ff := s.firstFit(); ca != ff {
			t.Fatalf("%s: cilium gave %s, the first free address is %s", o, ca, ff)
		}
		if err := s.c.releaseIP(s.fam.f, ca); err != nil {
			t.Fatalf("%s: cilium: release %s: %v", o, ca, err)
		}
		if err := s.c.allocateIP(s.fam.f, oa, o.owner); err != nil {
			t.Fatalf("%s: cilium: allocate %s: %v", o, oa, err)
		}
		s.met[dNextFit]++
	}
	s.held[oa] = o.owner
	s.cursor = oa
}

// byAddress runs Allocate or Release of a given address: the same
// outcome on both sides but for the differences on purpose.
func (s *pair) byAddress(o op) {
	t := s.t
	t.Helper()
	var oerr, cerr error
	if o.kind == opAllocate {
		_, oerr = s.ours.Allocate(ipOf(o.addr), o.owner)
		cerr = s.c.allocateIP(s.fam.f, o.addr, o.owner)
	} else {
		oerr = s.ours.Release(ipOf(o.addr))
		cerr = s.c.releaseIP(s.fam.f, o.addr)
	}
	oc, cc := ourClass(oerr), ciliumClass(cerr)
	if oc != cc {
		d := s.onPurpose(o, cc, oc)
		if d == "" {
			t.Fatalf("%s: cilium %s (%v), ours %s (%v)", o, cc, cerr, oc, oerr)
		}
		s.met[d]++
		return
	}
	verb := "Allocate"
	if o.kind == opRelease {
		verb = "Release"
	}
	s.agreed[fmt.Sprintf("%s [%s]: %s", verb, o.tgt, oc)]++
	if oc != ok {
		return
	}
	if o.kind == opAllocate {
		s.held[o.addr] = o.owner
	} else {
		delete(s.held, o.addr)
		s.releases++
	}
}

// onPurpose names the difference on purpose that explains Cilium's
// outcome cc and ours oc of o, "" when none does.
func (s *pair) onPurpose(o op, cc, oc class) string {
	_, held := s.held[o.addr]
	switch {
	case o.kind == opAllocate && oc == reserved && (cc == excluded && s.excl[o.addr] ||
		cc == taken && (o.tgt == "gateway" || o.tgt == "natLoop") ||
		cc == outOfRange && (o.tgt == "network" || o.tgt == "last")):
		return dReserved
	case o.kind == opAllocate && o.tgt == "outside" && oc == outOfRange && cc == excluded && s.excl[o.addr]:
		return dExclOut
	case o.kind == opRelease && o.tgt == "other" && oc == outOfRange && cc == ok:
		return dOtherFamR
	case o.kind == opRelease && !held && oc == notAllocated && cc == ok:
		return dRelease
	}
	return ""
}

// compare checks that both sides hold the model's allocations, with
// their owners. Cilium's side also holds the gateway and the NAT
// loopback ("reserved") and the excluded addresses its AllocateNext
// stepped over ("<owner> (excluded)"), which are no allocations (D1, D5).
func (s *pair) compare(o op) {
	t := s.t
	t.Helper()
	m, _ := s.ours.Dump()
	ours := dumpOf(t, m)
	cil := s.c.dump(s.fam.f)
	for _, a := range []netip.Addr{s.fam.gateway, s.fam.natLoop} {
		if cil[a] != "reserved" {
			t.Fatalf("after %s: cilium: %s is held by %q, not reserved", o, a, cil[a])
		}
		delete(cil, a)
	}
	for a, owner := range cil {
		if strings.HasSuffix(owner, " (excluded)") {
			if !s.excl[a] {
				t.Fatalf("after %s: cilium holds %s for %q but it is not excluded", o, a, owner)
			}
			delete(cil, a)
			if !s.exclHeld[a] {
				s.exclHeld[a] = true
				s.met[dExclHeld]++
			}
		}
	}
	if !maps.Equal(ours, s.held) || !maps.Equal(cil, s.held) {
		t.Fatalf("after %s:\n  cilium holds %v\n  ours   holds %v\n  model       %v", o, cil, ours, s.held)
	}
}

// kindOf names what a is to our window and the model.
func (s *pair) kindOf(a netip.Addr) string {
	switch a {
	case s.fam.network:
		return "network"
	case s.fam.gateway:
		return "gateway"
	case s.fam.natLoop:
		return "natLoop"
	case s.fam.last:
		return "last"
	case s.fam.other:
		return "other"
	}
	if _, held := s.held[a]; held {
		return "held"
	}
	switch {
	case !slices.Contains(s.fam.window, a):
		return "outside"
	case s.excl[a]:
		return "excluded"
	}
	return "free"
}

// randomOp draws the next step.
func (s *pair) randomOp(rng *rand.Rand) op {
	owner := fmt.Sprintf("default/pod-%d", rng.IntN(24))
	pick := func(as []netip.Addr) netip.Addr { return as[rng.IntN(len(as))] }
	var free, held, excl []netip.Addr
	for _, a := range s.fam.window {
		switch _, h := s.held[a]; {
		case h:
			held = append(held, a)
		case s.excl[a]:
			excl = append(excl, a)
		default:
			free = append(free, a)
		}
	}
	// target draws an address of a kind; a kind with no address falls
	// back to the next one in the list.
	target := func(kinds []string, weights []int) op {
		n := rng.IntN(100)
		i := 0
		for ; i < len(weights)-1 && n >= weights[i]; i++ {
			n -= weights[i]
		}
		for k := range kinds {
			kind := kinds[(i+k)%len(kinds)]
			var as []netip.Addr
			switch kind {
			case "free":
				as = free
			case "held":
				as = held
			case "excluded":
				as = excl
			case "network":
				as = []netip.Addr{s.fam.network}
			case "gateway":
				as = []netip.Addr{s.fam.gateway}
			case "natLoop":
				as = []netip.Addr{s.fam.natLoop}
			case "last":
				as = []netip.Addr{s.fam.last}
			case "outside":
				as = s.fam.outside
			case "other":
				as = []netip.Addr{s.fam.other}
			}
			if len(as) > 0 {
				a := pick(as)
				return op{tgt: s.kindOf(a), addr: a, owner: owner}
			}
		}
		panic("no target")
	}
	switch n := rng.IntN(100); {
	case n < 33:
		return op{kind: opNext, owner: owner}
	case n < 55:
		o := target([]string{"free", "held", "excluded", "network", "gateway", "natLoop", "last", "outside", "other"},
			[]int{40, 20, 8, 4, 4, 4, 4, 8, 8})
		o.kind = opAllocate
		return o
	case n < 98:
		// Not the gateway nor the NAT loopback: Cilium's side would free
		// its "reserved" hold (D1 in differences_test.go).
		o := target([]string{"held", "free", "excluded", "network", "last", "outside", "other"},
			[]int{55, 15, 8, 3, 3, 8, 8})
		o.kind = opRelease
		return o
	default:
		a := pick(s.fam.window)
		if rng.IntN(6) == 0 {
			a = pick(append([]netip.Addr{s.fam.network, s.fam.gateway, s.fam.natLoop, s.fam.last}, s.fam.outside...))
		}
		return op{kind: opBlacklist, tgt: s.kindOf(a), addr: a, owner: "blacklist"}
	}
}

// TestRandomSequencesAgree runs the same random sequences of
// AllocateNext, Allocate, Release and BlacklistIP through our per-family
// Allocator and Cilium's allocator code, seqs per family with fixed seeds,
// and compares every outcome and, after every step, what both hold. At
// the end it checks that every difference on purpose was met: the
// sequences do reach them.
func TestRandomSequencesAgree(t *testing.T) {
	for fi, f := range []ipam.Family{ipam.IPv4, ipam.IPv6} {
		t.Run(string(f), func(t *testing.T) {
			met, agreed := map[string]int{}, map[string]int{}
			counts := map[opKind]int{}
			for seed := 1; seed <= *seqsFlag; seed++ {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					// Every fourth sequence keeps our allocations in a
					// bolt file, the others in memory (ten times faster).
					st := inMemory
					if seed%4 == 0 {
						st = onBolt
					}
					s := newPair(t, f, st)
					rng := rand.New(rand.NewPCG(uint64(seed), uint64(fi)))
					var history []string
					t.Cleanup(func() {
						if t.Failed() {
							t.Logf("the sequence (seed %d, %s):\n  %s", seed, f, strings.Join(history, "\n  "))
						}
					})
					for range *stepsFlag {
						o := s.randomOp(rng)
						history = append(history, o.String())
						counts[o.kind]++
						s.step(o)
					}
					for d, n := range s.met {
						met[d] += n
					}
					for k, n := range s.agreed {
						agreed[k] += n
					}
				})
			}
			t.Logf("%d sequences of %d steps: %d AllocateNext, %d Allocate, %d Release, %d BlacklistIP",
				*seqsFlag, *stepsFlag, counts[opNext], counts[opAllocate], counts[opRelease], counts[opBlacklist])
			t.Logf("the same outcome on both sides:")
			for _, k := range slices.Sorted(maps.Keys(agreed)) {
				t.Logf("%6d × %s", agreed[k], k)
			}
			t.Logf("different on purpose:")
			for _, d := range slices.Sorted(maps.Keys(met)) {
				t.Logf("%6d × %s", met[d], d)
			}
			if t.Failed() || *seqsFlag < 20 {
				return
			}
			for _, k := range []string{"AllocateNext: ok", "AllocateNext: exhausted",
				"Allocate [free]: ok", "Allocate [held]: taken", "Allocate [excluded]: excluded",
				"Allocate [outside]: out of range",
				"Release [held]: ok"} {
				if agreed[k] == 0 {
					t.Errorf("no sequence met %q", k)
				}
			}
			for _, d := range []string{dReserved, dNextFit, dRelease, dExclOut, dExclHeld, dOtherFamR} {
				if met[d] == 0 {
					t.Errorf("no sequence met %q", d)
				}
			}
		})
	}
}

// TestAllocateNextBothFamiliesIsAllOrNothing runs AllocateNext("") on both
// sides with one family, the other or both full: both refuse and neither
// keeps an address of the family that had one free. Cilium allocates
// IPv6 first and releases it when IPv4 fails (IPAM.AllocateNext); ours
// takes the primary family (IPv4) first and rolls it back when IPv6 fails.
// What the rolled-back IPv4 address does to our next-fit cursor is
// pinned in differences_test.go (D2).
func TestAllocateNextBothFamiliesIsAllOrNothing(t *testing.T) {
	rows := []struct {
		name       string
		fillV4     bool
		fillV6     bool
		wantRefuse bool
	}{
		{"neither full: both get one of each", false, false, false},
		{"IPv4 full: Cilium releases its IPv6 address again, ours never took one", true, false, true},
		{"IPv6 full: Cilium never takes IPv4, ours rolls its IPv4 address back", false, true, true},
		{"both full", true, true, true},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			g := NewWithT(t)
			v4 := newPair(t, ipam.IPv4, inMemory)
			// One plugin, one Cilium side: the IPv6 pair shares them.
			v6 := &pair{t: t, fam: famOf(ipam.IPv6), p: v4.p, ours: v4.p.IPv6Allocator(), c: v4.c,
				held: map[netip.Addr]string{}, excl: map[netip.Addr]bool{}, met: map[string]int{},
				exclHeld: map[netip.Addr]bool{}, agreed: map[string]int{}}
			fill := func(s *pair) {
				for i := range s.fam.window {
					s.step(op{kind: opNext, owner: fmt.Sprintf("default/fill-%d", i)})
				}
				s.step(op{kind: opNext, owner: "default/one-too-many"}) // both exhausted
			}
			if row.fillV4 {
				fill(v4)
			}
			if row.fillV6 {
				fill(v6)
			}
			o4, o6, oerr := v4.p.AllocateNext("", "default/both")
			c4, c6, cerr := v4.c.allocateNext("", "default/both")
			if !row.wantRefuse {
				g.Expect(oerr).NotTo(HaveOccurred())
				g.Expect(cerr).NotTo(HaveOccurred())
				g.Expect(addrOf(t, o4.IP)).To(Equal(c4))
				g.Expect(addrOf(t, o6.IP)).To(Equal(c6))
				g.Expect(c4).To(Equal(v4.fam.window[0]))
				g.Expect(c6).To(Equal(v6.fam.window[0]))
				v4.held[c4], v6.held[c6] = "default/both", "default/both"
				v4.cursor, v6.cursor = c4, c6
			} else {
				g.Expect(oerr).To(MatchError(ipalloc.ErrPoolExhausted))
				g.Expect(ciliumClass(cerr)).To(Equal(full))
				g.Expect(o4).To(BeNil())
				g.Expect(o6).To(BeNil())
				g.Expect(c4.IsValid() || c6.IsValid()).To(BeFalse())
			}
			// Both sides hold what the model holds: nothing of the
			// refused call is left.
			v4.compare(op{kind: opNext, owner: "default/both"})
			v6.compare(op{kind: opNext, owner: "default/both"})
			if row.fillV4 && !row.fillV6 {
				// The IPv6 address Cilium took and released is its first
				// free one again, and ours next (step checks it).
				v6.step(op{kind: opNext, owner: "default/after"})
				g.Expect(v6.held).To(HaveKey(v6.fam.window[0]))
			}
		})
	}
}
