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
	"testing/synctest"
	"time"

	ciliumipam "github.com/cilium/cilium/pkg/ipam"

	"github.com/contiv-ipam/agent/plugins/ipam"
)

var (
	seqsFlag  = flag.Int("seqs", 160, "random sequences (seeds 1 to seqs)")
	stepsFlag = flag.Int("steps", 250, "calls per random sequence")
)

// opKind is what a step does.
type opKind int

const (
	opNext         opKind = iota // AllocateNext and its variants
	opAllocate                   // AllocateIP and its variants
	opRelease                    // ReleaseIP and its variants
	opReleaseOwner               // ReleaseIPString(owner)
	opExclude                    // BlacklistIP / ExcludeIP
	opStart                      // StartExpirationTimer
	opStop                       // StopExpirationTimer
	opAdvance                    // time passes
)

// op is one step of a sequence.
type op struct {
	kind    opKind
	call    string // our call (Cilium's is its counterpart)
	family  string // opNext: "", "ipv4" or "ipv6"
	addr    netip.Addr
	tgt     string // what addr was before the call (see seq.kindOf)
	owner   string
	timeout time.Duration // opNext with expiration, opStart
	id      string        // opStop: "right", "stale" or "random"
	d       time.Duration // opAdvance
}

func (o op) String() string {
	switch o.kind {
	case opNext:
		if o.timeout > 0 {
			return fmt.Sprintf("%s(%q, %q, %s)", o.call, o.family, o.owner, o.timeout)
		}
		return fmt.Sprintf("%s(%q, %q)", o.call, o.family, o.owner)
	case opAllocate, opExclude:
		return fmt.Sprintf("%s(%s [%s], %q)", o.call, o.addr, o.tgt, o.owner)
	case opRelease:
		return fmt.Sprintf("%s(%s [%s])", o.call, o.addr, o.tgt)
	case opReleaseOwner:
		return fmt.Sprintf("%s(%q)", o.call, o.owner)
	case opStart:
		return fmt.Sprintf("%s(%s [%s], %s)", o.call, o.addr, o.tgt, o.timeout)
	case opStop:
		return fmt.Sprintf("%s(%s [%s], %s ID)", o.call, o.addr, o.tgt, o.id)
	}
	return fmt.Sprintf("time passes: %s", o.d)
}

// timer is an expiration timer both sides run on one address: each
// side's ID and the deadline.
type timer struct {
	ours, cil string
	deadline  time.Time
}

// seq is one random sequence: our plugin and Cilium's IPAM on the same
// dual-stack node, and the model both must agree with.
type seq struct {
	t    testing.TB
	p    *ipam.Plugin
	c    *cilium
	fams map[ipam.Family]fam

	held   map[netip.Addr]string // the allocations both hold: address -> owner
	timers map[netip.Addr]timer  // the held addresses with an expiration timer
	gone   map[netip.Addr]timer  // the last timer of an address, stopped, fired or released
	excl   map[netip.Addr]bool   // the addresses excluded
	// exclHeld: the excluded addresses Cilium's AllocateNext took, seen.
	exclHeld map[netip.Addr]bool
	cursor   map[ipam.Family]netip.Addr
	tally    *tally
}

// newSeq starts both sides on node 1's dual-stack pod subnets. Cilium's
// side holds the gateway and the NAT loopback of both families (owner
// "reserved"), which ours never hands out, so that both have the same
// free addresses (reserved-addresses).
func newSeq(t testing.TB, st storage) *seq {
	t.Helper()
	p := newOurs(t, dualStack, st)
	checkSubnets(t, p, podV4, podV6)
	c := newCilium(podV4, podV6)
	s := &seq{t: t, p: p, c: c, fams: map[ipam.Family]fam{ipam.IPv4: famOf(ipam.IPv4), ipam.IPv6: famOf(ipam.IPv6)},
		held: map[netip.Addr]string{}, timers: map[netip.Addr]timer{}, gone: map[netip.Addr]timer{},
		excl: map[netip.Addr]bool{}, exclHeld: map[netip.Addr]bool{}, cursor: map[ipam.Family]netip.Addr{}, tally: newTally()}
	for _, x := range s.fams {
		c.reserveRouter(t, x)
	}
	return s
}

// free reports whether a is in our window and neither held nor excluded.
func (s *seq) free(a netip.Addr) bool {
	_, held := s.held[a]
	return !held && !s.excl[a] && slices.Contains(s.fams[famOfAddr(a)].window, a)
}

// nextFit is the address our AllocateNext must hand out in family f: the
// first free one after the cursor, wrapping around (invalid: none is
// free).
func (s *seq) nextFit(f ipam.Family) netip.Addr {
	w := s.fams[f].window
	start := 0
	if i := slices.Index(w, s.cursor[f]); i >= 0 {
		start = i + 1
	}
	for k := range w {
		if a := w[(start+k)%len(w)]; s.free(a) {
			return a
		}
	}
	return netip.Addr{}
}

// differ fails the test unless a difference of the table explains the
// two outcomes of o, and counts it.
func (s *seq) differ(o op, cc, oc class, cerr, oerr error, ownerHolds bool) {
	s.t.Helper()
	st := step{call: o.call, tgt: o.tgt, excl: s.excl[o.addr], ownerHolds: ownerHolds, cilium: cc, ours: oc}
	d := explain(st)
	if d == "" {
		s.t.Fatalf("%s: cilium %s (%v), ours %s (%v): no difference of the table explains it", o, cc, cerr, oc, oerr)
	}
	s.tally.met[d]++
}

// meet counts a difference of the table the sequence met otherwise than
// by an outcome class.
func (s *seq) meet(id string) { s.tally.met[diffByID(id).id]++ }

func (s *seq) agree(o op, c class) { s.tally.agreed[fmt.Sprintf("%s [%s]: %s", o.call, o.tgt, c)]++ }

// step runs o on both sides, fails the test where they differ other than
// as the table says, and then compares what each holds.
func (s *seq) step(o op) {
	s.t.Helper()
	s.tally.ops[o.call]++
	switch o.kind {
	case opNext:
		s.next(o)
	case opAllocate:
		s.allocate(o)
	case opRelease:
		s.release(o)
	case opReleaseOwner:
		s.releaseOwner(o)
	case opExclude:
		s.p.BlacklistIP(ipOf(o.addr), o.owner)
		s.c.ExcludeIP(o.addr, o.owner, pool)
		s.excl[o.addr] = true
	case opStart:
		s.start(o)
	case opStop:
		s.stop(o)
	case opAdvance:
		s.advance(o)
	}
	s.compare(o)
}

// families lists the families an opNext allocates.
func families(o op) []ipam.Family {
	if o.family == "" {
		return []ipam.Family{ipam.IPv4, ipam.IPv6}
	}
	return []ipam.Family{ipam.Family(o.family)}
}

// next runs an AllocateNext: the same outcome on both sides. Ours hands
// out the next-fit address, Cilium a random one (next-fit); where they
// differ, Cilium's side is given ours instead (released and allocated by
// address, its timer started again) so that both keep holding the same
// addresses.
func (s *seq) next(o op) {
	t := s.t
	t.Helper()
	ours := map[ipam.Family]*ipam.AllocationResult{}
	cil := map[ipam.Family]*ciliumipam.AllocationResult{}
	var oerr, cerr error
	f := ipam.Family(o.family)
	switch o.call {
	case "AllocateNext":
		ours[ipam.IPv4], ours[ipam.IPv6], oerr = s.p.AllocateNext(o.family, o.owner)
		cil[ipam.IPv4], cil[ipam.IPv6], cerr = s.c.AllocateNext(o.family, o.owner, pool)
	case "AllocateNextWithExpiration":
		ours[ipam.IPv4], ours[ipam.IPv6], oerr = s.p.AllocateNextWithExpiration(o.family, o.owner, o.timeout)
		cil[ipam.IPv4], cil[ipam.IPv6], cerr = s.c.AllocateNextWithExpiration(o.family, o.owner, pool, o.timeout)
	case "AllocateNextFamily":
		ours[f], oerr = s.p.AllocateNextFamily(f, o.owner)
		cil[f], cerr = s.c.AllocateNextFamily(ciliumipam.Family(f), o.owner, pool)
	case "Allocator.AllocateNext":
		ours[f], oerr = allocatorOf(s.p, f).AllocateNext(o.owner)
		cil[f], cerr = s.c.AllocateNextFamily(ciliumipam.Family(f), o.owner, pool)
	}
	oc, cc := ourClass(oerr), ciliumClass(cerr)
	if oc != cc {
		s.differ(o, cc, oc, cerr, oerr, false)
		return
	}
	s.agree(o, oc)
	if oc != ok {
		exhausted := false
		for _, f := range families(o) {
			exhausted = exhausted || !s.nextFit(f).IsValid()
		}
		if oc != full || !exhausted {
			t.Fatalf("%s: both %s (ours: %v), with an address of every family free", o, oc, oerr)
		}
		for _, f := range families(o) {
			if f == ipam.IPv6 && ours[f] == nil && cil[f] != nil && cil[ipam.IPv4] == nil && o.call == "AllocateNext" && o.family == "" {
				s.meet("refused-result") // compare checks that Cilium released it
				continue
			}
			if ours[f] != nil || cil[f] != nil {
				t.Fatalf("%s: refused, but ours gave %v, cilium %v", o, ours[f], cil[f])
			}
		}
		return
	}
	ids := map[string]bool{}
	for _, f := range families(o) {
		or, cr := ours[f], cil[f]
		if or == nil || cr == nil {
			t.Fatalf("%s: %s: ours gave %v, cilium %v", o, f, or, cr)
		}
		x := s.fams[f]
		oa := addrOf(t, or.IP)
		if want := s.nextFit(f); oa != want {
			t.Fatalf("%s: ours gave %s, next-fit after %s is %s (held %v, excluded %v)", o, oa, s.cursor[f], want,
				slices.SortedFunc(maps.Keys(s.held), netip.Addr.Compare), slices.SortedFunc(maps.Keys(s.excl), netip.Addr.Compare))
		}
		if !slices.Equal(or.CIDRs, []string{x.prefix.String()}) || or.GatewayIP != x.gateway.String() ||
			len(cr.CIDRs) != 0 || cr.GatewayIP.IsValid() || cr.IPPoolName != pool {
			t.Fatalf("%s: ours gave CIDRs %v gateway %q, cilium CIDRs %v gateway %v pool %q", o, or.CIDRs, or.GatewayIP,
				cr.CIDRs, cr.GatewayIP, cr.IPPoolName)
		}
		s.meet("result-fields")
		withTimer := o.call == "AllocateNextWithExpiration"
		if withTimer && (or.ExpirationUUID == "" || cr.ExpirationUUID == "" || ids[or.ExpirationUUID]) ||
			!withTimer && (or.ExpirationUUID != "" || cr.ExpirationUUID != "") {
			t.Fatalf("%s: %s: ours' expiration ID %q, cilium's %q (ours so far %v)", o, f, or.ExpirationUUID, cr.ExpirationUUID, ids)
		}
		ids[or.ExpirationUUID] = true
		if ca := cr.IP; ca != oa {
			s.meet("next-fit")
			if err := s.c.ReleaseIP(ca, pool); err != nil {
				t.Fatalf("%s: cilium: release %s: %v", o, ca, err)
			}
			if err := s.c.AllocateIP(oa, o.owner, pool); err != nil {
				t.Fatalf("%s: cilium: allocate %s: %v", o, oa, err)
			}
			if withTimer {
				id, err := s.c.StartExpirationTimer(oa, pool, o.timeout)
				if err != nil {
					t.Fatalf("%s: cilium: timer on %s: %v", o, oa, err)
				}
				cr.ExpirationUUID = id
			}
		}
		s.held[oa] = o.owner
		s.cursor[f] = oa
		if withTimer {
			s.timers[oa] = timer{ours: or.ExpirationUUID, cil: cr.ExpirationUUID, deadline: time.Now().Add(o.timeout)}
		}
	}
}

// allocate runs an AllocateIP.
func (s *seq) allocate(o op) {
	var oerr, cerr error
	switch o.call {
	case "AllocateIP":
		oerr = s.p.AllocateIP(ipOf(o.addr), o.owner)
		cerr = s.c.AllocateIP(o.addr, o.owner, pool)
	case "AllocateIPString":
		oerr = s.p.AllocateIPString(o.addr.String(), o.owner)
		cerr = s.c.AllocateIPString(o.addr.String(), o.owner, pool)
	case "Allocator.Allocate":
		_, oerr = allocatorOf(s.p, famOfAddr(o.addr)).Allocate(ipOf(o.addr), o.owner)
		cerr = s.c.AllocateIP(o.addr, o.owner, pool)
	}
	oc, cc := ourClass(oerr), ciliumClass(cerr)
	if oc != cc {
		s.differ(o, cc, oc, cerr, oerr, false)
		return
	}
	s.agree(o, oc)
	if oc == ok {
		s.held[o.addr] = o.owner
	}
}

// forget drops a's allocation and timer from the model.
func (s *seq) forget(a netip.Addr) {
	delete(s.held, a)
	if tm, ok := s.timers[a]; ok {
		s.gone[a] = tm
		delete(s.timers, a)
	}
}

// release runs a ReleaseIP.
func (s *seq) release(o op) {
	var oerr, cerr error
	switch o.call {
	case "ReleaseIP":
		oerr = s.p.ReleaseIP(ipOf(o.addr))
	case "ReleaseIPString(ip)":
		oerr = s.p.ReleaseIPString(o.addr.String())
	case "Allocator.Release":
		oerr = allocatorOf(s.p, famOfAddr(o.addr)).Release(ipOf(o.addr))
	}
	cerr = s.c.ReleaseIP(o.addr, pool)
	oc, cc := ourClass(oerr), ciliumClass(cerr)
	if oc != cc {
		s.differ(o, cc, oc, cerr, oerr, false)
		return
	}
	s.agree(o, oc)
	if oc == ok {
		s.forget(o.addr)
	}
}

// releaseOwner runs a ReleaseIPString of an owner name; Cilium's side
// releases every address its Dump lists for the owner (v1.20.2 has no
// release by owner).
func (s *seq) releaseOwner(o op) {
	var mine []netip.Addr
	for a, owner := range s.held {
		if owner == o.owner {
			mine = append(mine, a)
		}
	}
	oerr := s.p.ReleaseIPString(o.owner)
	cerr := s.c.releaseOwner(s.t, o.owner)
	oc, cc := ourClass(oerr), ciliumClass(cerr)
	if oc != cc {
		s.differ(o, cc, oc, cerr, oerr, len(mine) > 0)
		return
	}
	s.agree(o, oc)
	if oc == ok {
		for _, a := range mine {
			s.forget(a)
		}
	}
}

// start runs a StartExpirationTimer. Where Cilium starts a timer ours
// refuses (timer-on-unheld), Cilium's is stopped again at once.
func (s *seq) start(o op) {
	t := s.t
	t.Helper()
	oid, oerr := s.p.StartExpirationTimer(ipOf(o.addr), o.timeout)
	cid, cerr := s.c.StartExpirationTimer(o.addr, pool, o.timeout)
	oc, cc := ourClass(oerr), ciliumClass(cerr)
	if oc != cc {
		s.differ(o, cc, oc, cerr, oerr, false)
		if cc == ok {
			if err := s.c.StopExpirationTimer(o.addr, pool, cid); err != nil {
				t.Fatalf("%s: cilium: stopping its timer again: %v", o, err)
			}
		}
		return
	}
	s.agree(o, oc)
	if oc == ok {
		if oid == "" || cid == "" {
			t.Fatalf("%s: ours' ID %q, cilium's %q", o, oid, cid)
		}
		s.timers[o.addr] = timer{ours: oid, cil: cid, deadline: time.Now().Add(o.timeout)}
	}
}

// stop runs a StopExpirationTimer with the ID of the address's timer
// (right), of its last one (stale) or a new one (random).
func (s *seq) stop(o op) {
	oid, cid := "not-an-id", "not-an-id"
	switch o.id {
	case "right":
		if tm, ok := s.timers[o.addr]; ok {
			oid, cid = tm.ours, tm.cil
		}
	case "stale":
		if tm, ok := s.gone[o.addr]; ok {
			oid, cid = tm.ours, tm.cil
		}
	}
	oerr := s.p.StopExpirationTimer(ipOf(o.addr), oid)
	cerr := s.c.StopExpirationTimer(o.addr, pool, cid)
	oc, cc := ourClass(oerr), ciliumClass(cerr)
	if oc != cc {
		s.differ(o, cc, oc, cerr, oerr, false)
		return
	}
	s.agree(o, oc)
	if oc == ok {
		s.gone[o.addr] = s.timers[o.addr]
		delete(s.timers, o.addr)
	}
}

// advance lets o.d pass, moved on by whole seconds so that no deadline is
// within a second of the end (each side takes its deadline from the
// bubble's clock when it starts the timer, which calls on the same step
// share but for a few milliseconds); every timer due by then has fired on
// both sides once the bubble is idle.
func (s *seq) advance(o op) {
	now := time.Now()
	d := o.d
	for moved := true; moved; {
		moved = false
		for _, tm := range s.timers {
			if gap := now.Add(d).Sub(tm.deadline); gap > -time.Second && gap < time.Second {
				d += 2 * time.Second
				moved = true
			}
		}
	}
	time.Sleep(d)
	synctest.Wait()
	now = time.Now()
	for a, tm := range s.timers {
		if !tm.deadline.After(now) {
			s.forget(a)
			s.tally.agreed["a timer fires: its address alone is released"]++
		}
	}
}

// compare checks that both sides hold the model's allocations, with
// their owners, and that ours has the model's count of timers. Cilium's
// side also holds the gateway and the NAT loopback ("reserved") and the
// excluded addresses its AllocateNext took ("<owner> (excluded)"), which
// are no allocations.
func (s *seq) compare(o op) {
	t := s.t
	t.Helper()
	v4, v6, status := s.p.Dump()
	ours := dumpOf(t, v4)
	maps.Copy(ours, dumpOf(t, v6))
	cil := s.c.dump(t)
	for _, x := range s.fams {
		for _, a := range []netip.Addr{x.gateway, x.natLoop} {
			if cil[a] != "reserved" {
				t.Fatalf("after %s: cilium: %s is held by %q, not reserved", o, a, cil[a])
			}
			delete(cil, a)
		}
	}
	for a, owner := range cil {
		if strings.HasSuffix(owner, " (excluded)") {
			if !s.excl[a] {
				t.Fatalf("after %s: cilium holds %s for %q but it is not excluded", o, a, owner)
			}
			delete(cil, a)
			if !s.exclHeld[a] {
				s.exclHeld[a] = true
				s.meet("excluded-in-dump")
			}
		}
	}
	if !maps.Equal(ours, s.held) || !maps.Equal(cil, s.held) {
		t.Fatalf("after %s:\n  cilium holds %v\n  ours   holds %v\n  model       %v", o, cil, ours, s.held)
	}
	if n := reservationsOf(t, status); n != len(s.timers) {
		t.Fatalf("after %s: ours has %d timers, the model %d: %v", o, n, len(s.timers), s.timers)
	}
}

// kindOf names what a is to the model.
func (s *seq) kindOf(a netip.Addr) string {
	x := s.fams[famOfAddr(a)]
	switch a {
	case x.network:
		return "network"
	case x.gateway:
		return "gateway"
	case x.natLoop:
		return "natLoop"
	case x.last:
		return "last"
	}
	if _, held := s.held[a]; held {
		return "held"
	}
	switch {
	case !slices.Contains(x.window, a):
		return "outside"
	case s.excl[a]:
		return "excluded"
	}
	return "free"
}

// pickOne draws an element of as.
func pickOne[T any](rng *rand.Rand, as []T) T { return as[rng.IntN(len(as))] }

// weighted draws one of kinds with the weights (in percent).
func weighted(rng *rand.Rand, kinds []string, weights []int) []string {
	n := rng.IntN(100)
	i := 0
	for ; i < len(weights)-1 && n >= weights[i]; i++ {
		n -= weights[i]
	}
	// The kind drawn first, then the others in order: a kind with no
	// address falls back to the next one.
	return append(append([]string(nil), kinds[i:]...), kinds[:i]...)
}

// target draws an address of one of kinds (see weighted) in family f.
func (s *seq) target(rng *rand.Rand, f ipam.Family, kinds []string, weights []int) netip.Addr {
	x := s.fams[f]
	for _, kind := range weighted(rng, kinds, weights) {
		var as []netip.Addr
		switch kind {
		case "free", "held", "excluded", "timed", "untimed":
			for _, a := range x.window {
				_, timed := s.timers[a]
				_, held := s.held[a]
				k := s.kindOf(a)
				if k == kind || kind == "timed" && timed || kind == "untimed" && held && !timed {
					as = append(as, a)
				}
			}
		case "network":
			as = []netip.Addr{x.network}
		case "gateway":
			as = []netip.Addr{x.gateway}
		case "natLoop":
			as = []netip.Addr{x.natLoop}
		case "last":
			as = []netip.Addr{x.last}
		case "outside":
			as = x.outside
		}
		if len(as) > 0 {
			return pickOne(rng, as)
		}
	}
	panic("no target")
}

// randomOp draws the next step.
func (s *seq) randomOp(rng *rand.Rand) op {
	owner := fmt.Sprintf("default/pod-%d", rng.IntN(16))
	f := pickOne(rng, []ipam.Family{ipam.IPv4, ipam.IPv6})
	timeout := time.Duration(1+rng.IntN(4)) * 30 * time.Second
	at := func(kinds []string, weights []int) (netip.Addr, string) {
		a := s.target(rng, f, kinds, weights)
		return a, s.kindOf(a)
	}
	switch n := rng.IntN(100); {
	case n < 26:
		o := op{kind: opNext, owner: owner, family: pickOne(rng, []string{"", "", "ipv4", "ipv6"})}
		switch m := rng.IntN(100); {
		case m < 40:
			o.call = "AllocateNext"
		case m < 70:
			o.call, o.timeout = "AllocateNextWithExpiration", timeout
		case m < 85:
			o.call, o.family = "AllocateNextFamily", string(f)
		default:
			o.call, o.family = "Allocator.AllocateNext", string(f)
		}
		return o
	case n < 41:
		a, k := at([]string{"free", "held", "excluded", "network", "gateway", "natLoop", "last", "outside"},
			[]int{40, 20, 8, 4, 4, 4, 4, 16})
		return op{kind: opAllocate, call: pickOne(rng, []string{"AllocateIP", "AllocateIP", "AllocateIPString", "Allocator.Allocate"}),
			addr: a, tgt: k, owner: owner}
	case n < 58:
		// Not the gateway nor the NAT loopback: Cilium's side would free
		// its "reserved" hold (reserved-addresses pins that).
		a, k := at([]string{"held", "free", "excluded", "network", "last", "outside"}, []int{55, 15, 8, 3, 3, 16})
		return op{kind: opRelease, call: pickOne(rng, []string{"ReleaseIP", "ReleaseIP", "ReleaseIPString(ip)", "Allocator.Release"}),
			addr: a, tgt: k}
	case n < 62:
		if len(s.held) > 0 && rng.IntN(10) < 7 {
			owner = s.held[pickOne(rng, slices.Collect(maps.Keys(s.held)))]
		}
		return op{kind: opReleaseOwner, call: "ReleaseIPString(owner)", owner: owner}
	case n < 65:
		a := pickOne(rng, s.fams[f].window)
		if rng.IntN(6) == 0 {
			x := s.fams[f]
			a = pickOne(rng, append([]netip.Addr{x.network, x.gateway, x.natLoop, x.last}, x.outside...))
		}
		return op{kind: opExclude, call: "BlacklistIP", addr: a, tgt: s.kindOf(a), owner: "blacklist"}
	case n < 79:
		a, k := at([]string{"untimed", "timed", "free", "excluded", "gateway", "outside"}, []int{50, 15, 15, 7, 5, 8})
		return op{kind: opStart, call: "StartExpirationTimer", addr: a, tgt: k, timeout: timeout}
	case n < 93:
		a, k := at([]string{"timed", "untimed", "free", "excluded", "outside"}, []int{60, 15, 15, 5, 5})
		return op{kind: opStop, call: "StopExpirationTimer", addr: a, tgt: k,
			id: pickOne(rng, []string{"right", "right", "right", "stale", "random"})}
	}
	return op{kind: opAdvance, call: "time passes", d: pickOne(rng, []time.Duration{10, 30, 45, 60, 100}) * time.Second}
}

// bubble runs f in a synctest bubble. At its end the bubble's time runs
// on until every timer Cilium's IPAM started has fired: its goroutines
// must end before the bubble does.
func bubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		t.Cleanup(func() {
			time.Sleep(24 * time.Hour)
			synctest.Wait()
		})
		f(t)
	})
}

// runSequences runs the same random sequences of calls through our
// plugin and Cilium's IPAM, seqs of them with fixed seeds, each in a
// synctest bubble (the timers of both sides run on its clock), and
// compares every outcome and, after every step, what both hold. Every
// fourth sequence keeps our allocations in a bolt file, the others in
// memory.
func runSequences(t *testing.T, all *tally) {
	for seed := 1; seed <= *seqsFlag; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			bubble(t, func(t *testing.T) {
				st := inMemory
				if seed%4 == 0 {
					st = onBolt
				}
				s := newSeq(t, st)
				rng := rand.New(rand.NewPCG(uint64(seed), 2))
				var history []string
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("the sequence (seed %d):\n  %s", seed, strings.Join(history, "\n  "))
					}
				})
				for range *stepsFlag {
					o := s.randomOp(rng)
					history = append(history, o.String())
					s.step(o)
				}
				all.add(s.tally)
			})
		})
	}
	t.Cleanup(func() {
		t.Logf("%d sequences of %d calls:", *seqsFlag, *stepsFlag)
		for _, k := range slices.Sorted(maps.Keys(all.ops)) {
			t.Logf("%6d × %s", all.ops[k], k)
		}
		t.Logf("the same outcome on both sides:")
		for _, k := range slices.Sorted(maps.Keys(all.agreed)) {
			t.Logf("%6d × %s", all.agreed[k], k)
		}
		t.Logf("different, as the table says:")
		for _, d := range slices.Sorted(maps.Keys(all.met)) {
			t.Logf("%6d × %s", all.met[d], d)
		}
		if t.Failed() || all.seqs < 20 {
			return
		}
		for _, k := range []string{"AllocateNext []: ok", "AllocateNext []: exhausted", "AllocateNextWithExpiration []: ok",
			"AllocateNextFamily []: ok", "Allocator.AllocateNext []: ok",
			"AllocateIP [free]: ok", "AllocateIP [held]: taken", "AllocateIP [excluded]: excluded", "AllocateIP [outside]: out of range",
			"ReleaseIP [held]: ok", "Allocator.Release [held]: ok", "ReleaseIPString(ip) [held]: ok", "ReleaseIPString(owner) []: ok",
			"StartExpirationTimer [held]: ok", "StartExpirationTimer [held]: timer exists",
			"StopExpirationTimer [held]: ok", "StopExpirationTimer [held]: no such timer",
			"a timer fires: its address alone is released"} {
			if all.agreed[k] == 0 {
				t.Errorf("no sequence met %q", k)
			}
		}
	})
}
