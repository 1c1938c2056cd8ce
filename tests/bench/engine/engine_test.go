package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	ciliumipallocator "github.com/cilium/cilium/pkg/ipam/service/ipallocator"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam/cidrset"
	svcipallocator "k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
)

// BenchmarkEngine churns a pool at a constant fill: one op releases the
// address of a random slot and allocates the next address into it. The
// pool starts from the same addresses for every implementation: a random
// subset of the window for IPv4, the first 2^20 addresses for the /64 (the
// state next-fit leaves); taking them is setup, outside the timing, and
// done once per cell (see warm).
func BenchmarkEngine(b *testing.B) {
	for _, s := range []shape{v4s24, v4s16, v4s12} {
		b.Run("pool="+s.name, func(b *testing.B) {
			for _, fill := range []int{50, 90, 99} {
				n := s.size() * fill / 100
				b.Run(fmt.Sprintf("fill=%d", fill), func(b *testing.B) {
					for _, im := range impls {
						b.Run("impl="+im.name, func(b *testing.B) {
							churn(b, im, s, n, func() []netip.Addr { return s.scattered(n) })
						})
					}
				})
			}
		})
	}
	b.Run("pool="+v6s64.name, func(b *testing.B) {
		const n = 1 << 20
		b.Run(fmt.Sprintf("inuse=%d", n), func(b *testing.B) {
			for _, im := range impls {
				b.Run("impl="+im.name, func(b *testing.B) {
					churn(b, im, v6s64, n, func() []netip.Addr { return v6s64.firstN(n) })
				})
			}
		})
	})
}

// warm is the pool of the last cell BenchmarkEngine ran, kept for the next
// run of the same cell (go test -count runs a cell's samples one after
// another): filling a /12 takes seconds for some implementations, so it is
// done once per cell and process, and the samples are consecutive stretches
// of one churn at the same fill.
var warm struct {
	name string
	e    engine
	idx  []int // random slots
	next int   // the next index into idx
}

// churn is one cell of BenchmarkEngine: n addresses in use, from addrs.
func churn(b *testing.B, im impl, s shape, n int, addrs func() []netip.Addr) {
	if reason := im.na(s, n); reason != "" {
		b.Skip(reason)
	}
	if warm.name != b.Name() {
		warm.name, warm.e, warm.idx = "", nil, nil
		runtime.GC() // the last cell's pool, not to be collected on this one's time
		e, err := im.open(s, n)
		if err != nil {
			b.Fatal(err)
		}
		for slot, a := range addrs() {
			if err := e.take(slot, a); err != nil {
				b.Fatalf("take %s: %v", a, err)
			}
		}
		runtime.GC()
		warm.name, warm.e, warm.idx, warm.next = b.Name(), e, randomSlots(n), 0
	}
	e, idx, i := warm.e, warm.idx, warm.next
	defer func() { warm.next = i }()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		slot := idx[i&(len(idx)-1)]
		i++
		if err := e.release(slot); err != nil {
			warm.name = "" // the pool is broken: do not reuse it
			b.Fatalf("op %d: release: %v", i, err)
		}
		if _, err := e.allocate(slot); err != nil {
			warm.name = ""
			b.Fatalf("op %d: allocate: %v", i, err)
		}
	}
}

// TestEngines drives every adapter through a churn on a small pool with
// three addresses free: no address may be handed out while held, every
// address must be in the window, and every release must be accepted. A
// release that frees nothing runs the pool out within three ops.
func TestEngines(t *testing.T) {
	v4s26 := shape{name: "v4-26", prefix: netip.MustParsePrefix("10.9.9.64/26")}
	cases := []struct {
		name  string
		s     shape
		n     int
		addrs []netip.Addr
	}{
		{name: "v4-26 scattered", s: v4s26, n: v4s26.size() - 3, addrs: v4s26.scattered(v4s26.size() - 3)},
		{name: "v4-26 empty", s: v4s26, n: v4s26.size() - 3},
		{name: "v6-64 first 64", s: v6s64, n: 64, addrs: v6s64.firstN(64)},
	}
	for _, c := range cases {
		for _, im := range impls {
			t.Run(c.name+"/"+im.name, func(t *testing.T) {
				t.Parallel()
				if reason := im.na(c.s, c.n); reason != "" {
					t.Skip(reason)
				}
				testChurn(t, im, c.s, c.n, c.addrs)
			})
		}
	}
}

// testChurn fills n slots (from addrs, then by allocate) and churns.
func testChurn(t *testing.T, im impl, s shape, n int, addrs []netip.Addr) {
	e, err := im.open(s, n)
	if err != nil {
		t.Fatal(err)
	}
	held := make(map[netip.Addr]int) // address -> slot
	slotAddr := make([]netip.Addr, n)
	hold := func(slot int, a netip.Addr) {
		t.Helper()
		if !s.prefix.Contains(a) || a == s.prefix.Addr() || (!s.is6() && a == lastAddr(s.prefix)) {
			t.Fatalf("slot %d: %s is outside the window of %s", slot, a, s.prefix)
		}
		if other, dup := held[a]; dup {
			t.Fatalf("slot %d: %s is already held by slot %d", slot, a, other)
		}
		held[a], slotAddr[slot] = slot, a
	}
	for slot, a := range addrs {
		if err := e.take(slot, a); err != nil {
			t.Fatalf("take %s: %v", a, err)
		}
		hold(slot, a)
	}
	for slot := len(addrs); slot < n; slot++ {
		a, err := e.allocate(slot)
		if err != nil {
			t.Fatalf("allocate into slot %d: %v", slot, err)
		}
		hold(slot, a)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for op := range 2000 {
		slot := rng.IntN(n)
		if err := e.release(slot); err != nil {
			t.Fatalf("op %d: release %s: %v", op, slotAddr[slot], err)
		}
		delete(held, slotAddr[slot])
		a, err := e.allocate(slot)
		if err != nil {
			t.Fatalf("op %d: allocate after releasing %s: %v", op, slotAddr[slot], err)
		}
		hold(slot, a)
	}
}

// TestNotApplicableLimits checks that the limits the n/a cells cite are
// the peers' real behaviour at the pinned versions, and that the na
// functions apply them where they should.
func TestNotApplicableLimits(t *testing.T) {
	if got := ciliumipallocator.NewCIDRRange(v6s64.prefix).Free(); got != 65534 {
		t.Errorf("cilium: a /64 range has %d free addresses, want 65534", got)
	}
	if got := ciliumipallocator.NewCIDRRange(v4s12.prefix).Free(); got != v4s12.size() {
		t.Errorf("cilium: a /12 range has %d free addresses, want %d", got, v4s12.size())
	}
	r, err := svcipallocator.NewInMemory(ipNet(v6s64.prefix))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Free(); got != serviceMax-1 {
		t.Errorf("k8s service: a /64 range has %d free addresses, want %d", got, serviceMax-1)
	}
	r, err = svcipallocator.NewInMemory(ipNet(v4s12.prefix))
	if err != nil || r.Free() != v4s12.size() {
		t.Errorf("k8s service: a /12 range: %v, want %d free addresses", err, v4s12.size())
	}
	v6diff17 := netip.MustParsePrefix("fd00::/111")
	if _, err := cidrset.NewCIDRSet(ipNet(v6diff17), 128); !errors.Is(err, cidrset.ErrCIDRSetSubNetTooBig) {
		t.Errorf("cidrset: /111 in /128s (17 bits): %v, want ErrCIDRSetSubNetTooBig", err)
	}
	if _, err := cidrset.NewCIDRSet(ipNet(netip.MustParsePrefix("fd00::/112")), 128); err != nil {
		t.Errorf("cidrset: /112 in /128s (16 bits): %v", err)
	}
	if _, err := cidrset.NewCIDRSet(ipNet(v4s12.prefix), 32); err != nil {
		t.Errorf("cidrset: the 16-bit limit is for IPv6 only, yet a /12 in /32s fails: %v", err)
	}

	for _, c := range []struct {
		im   string
		s    shape
		n    int
		isNA bool
	}{
		{"cilium", v6s64, 1 << 20, true}, {"cilium", v6s64, 65534, false}, {"cilium", v4s12, v4s12.size(), false},
		{"k8s-service", v6s64, 100000, true}, {"k8s-service", v6s64, 65535, false}, {"k8s-service", v4s12, v4s12.size(), false},
		{"k8s-cidrset", v6s64, 0, true}, {"k8s-cidrset", v4s12, v4s12.size(), false},
		{"bitmap", v6s64, 0, true}, {"bitmap", v4s12, v4s12.size(), false},
	} {
		for _, im := range impls {
			if im.name == c.im {
				if reason := im.na(c.s, c.n); (reason != "") != c.isNA {
					t.Errorf("%s on %s with %d: na = %q, want n/a %v", c.im, c.s.name, c.n, reason, c.isNA)
				}
			}
		}
	}
}
