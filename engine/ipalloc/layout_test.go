package ipalloc

import (
	"net/netip"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
)

// TestBigPools allocates at the very top of /64, /60 and /48 windows.
func TestBigPools(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, prefix, top, beyond string
	}{
		{name: "/64", prefix: "fd00::/64", top: "fd00::ffff:ffff:ffff:fffd", beyond: "fd00::ffff:ffff:ffff:fffe"},
		{name: "/60", prefix: "fd00:0:0:10::/60", top: "fd00:0:0:10:ffff:ffff:ffff:ffff", beyond: "fd00:0:0:11::"},
		{name: "/48", prefix: "fd00:1::/48", top: "fd00:1::ffff:ffff:ffff:ffff", beyond: "fd00:1:0:1::"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p := mustPool(t, Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2})
			top, beyond := addr(tc.top), addr(tc.beyond)
			g.Expect(p.Contains(top)).To(BeTrue())
			g.Expect(p.Contains(beyond)).To(BeFalse())
			g.Expect(p.AllocateAddr(beyond)).To(MatchError(ErrOutOfRange))
			g.Expect(p.AllocateAddr(top)).To(Succeed())
			g.Expect(p.IsAllocated(top)).To(BeTrue())
			g.Expect(p.SetCursor(top.Prev().Prev())).To(Succeed())
			g.Expect(p.Allocate()).To(Equal(top.Prev()))
			first := p.AddrAt(2)
			g.Expect(p.Allocate()).To(Equal(first), "wraps from the top of the window")
			g.Expect(p.Allocate()).To(Equal(first.Next()))
			off, ok := p.OffsetOf(top)
			g.Expect(ok).To(BeTrue())
			g.Expect(p.AddrAt(off)).To(Equal(top))
			g.Expect(p.ReleaseOffset(off)).To(Succeed())
			g.Expect(p.Used()).To(Equal(uint64(3)))
			var got []netip.Addr
			p.Range(func(a netip.Addr) bool { got = append(got, a); return true })
			g.Expect(got).To(Equal([]netip.Addr{first, first.Next(), top.Prev()}))
		})
	}
}

// TestLargeDenseAndSparse fills a window of about 2^20 addresses in both
// layouts, so that the search skips whole groups of full chunks.
func TestLargeDenseAndSparse(t *testing.T) {
	t.Parallel()
	for _, l := range []layout{denseLayout, sparseLayout} {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p, err := newPool(Config{Prefix: prefix("10.16.0.0/12"), ReserveLow: 2, ReserveHigh: 2}, l)
			g.Expect(err).NotTo(HaveOccurred())
			for range p.Size() {
				if _, err := p.AllocateOffset(); err != nil {
					t.Fatal(err)
				}
			}
			_, err = p.AllocateOffset()
			g.Expect(err).To(MatchError(ErrPoolExhausted))
			for _, off := range []uint64{1<<20 - 3, 2, 1 << 19, 1<<18 + 77} {
				g.Expect(p.ReleaseOffset(off)).To(Succeed())
				g.Expect(p.SetCursor(p.AddrAt(off + 1))).To(Succeed())
				g.Expect(p.AllocateOffset()).To(Equal(off), "found after a wrap across every full chunk")
			}
		})
	}
}

// TestNoAllocs checks that the hot path allocates no memory.
func TestNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	for _, tc := range []struct {
		name   string
		prefix string
		l      layout
	}{
		{name: "dense v4", prefix: "10.0.0.0/16", l: auto},
		{name: "sparse v4", prefix: "10.0.0.0/16", l: sparseLayout},
		{name: "sparse v6 /64", prefix: "fd00::/64", l: auto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := newPool(Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2}, tc.l)
			g.Expect(err).NotTo(HaveOccurred())
			for range 60000 {
				if _, err := p.AllocateOffset(); err != nil {
					t.Fatal(err)
				}
			}
			victim := uint64(2)
			g.Expect(testing.AllocsPerRun(1000, func() {
				if err := p.ReleaseOffset(victim); err != nil {
					t.Fatal(err)
				}
				off, err := p.AllocateOffset()
				if err != nil {
					t.Fatal(err)
				}
				victim = off - 7
			})).To(BeZero(), "offsets")
			g.Expect(testing.AllocsPerRun(1000, func() {
				a, err := p.Allocate()
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Release(a); err != nil {
					t.Fatal(err)
				}
				if err := p.AllocateAddr(a); err != nil {
					t.Fatal(err)
				}
				_ = p.IsAllocated(a) && p.Contains(a)
			})).To(BeZero(), "addresses")
		})
	}
}

// TestSparseMemory measures /64 pools with 1000 allocations each. It
// counts every byte allocated (TotalAlloc): with nothing freed on the way
// that is what the pools hold, and unlike HeapAlloc it is not disturbed by
// garbage of other tests.
func TestSparseMemory(t *testing.T) {
	g := NewWithT(t)
	const pools = 64
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	all := make([]*Pool, pools)
	for i := range all {
		all[i] = mustPool(t, Config{Prefix: prefix("fd00::/64"), ReserveLow: 2, ReserveHigh: 2})
		for range 1000 {
			if _, err := all[i].Allocate(); err != nil {
				t.Fatal(err)
			}
		}
	}
	runtime.ReadMemStats(&after)
	perPool := (after.TotalAlloc - before.TotalAlloc - uint64(pools*8)) / pools
	runtime.KeepAlive(all)
	t.Logf("a /64 pool with 1000 allocations: %d bytes allocated, %d heap objects", perPool, (after.Mallocs-before.Mallocs-1)/pools)
	g.Expect(perPool).To(BeNumerically("<", 2<<10))
}
