package ipalloc

import (
	"errors"
	"math"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func mustPool(t *testing.T, cfg Config) *Pool {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func prefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// allocateAll allocates until the pool is full and returns the addresses in
// the order they were handed out.
func allocateAll(t *testing.T, p *Pool) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for {
		a, err := p.Allocate()
		if errors.Is(err, ErrPoolExhausted) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		cfg         Config
		err         bool
		size        uint64
		first, last string // the window
	}{
		{name: "v4 /29", cfg: Config{Prefix: prefix("1.2.128.8/29"), ReserveLow: 2, ReserveHigh: 2}, size: 4, first: "1.2.128.10", last: "1.2.128.13"},
		{name: "v6 /125", cfg: Config{Prefix: prefix("fd00::8/125"), ReserveLow: 2, ReserveHigh: 2}, size: 4, first: "fd00::a", last: "fd00::d"},
		{name: "v4 masked", cfg: Config{Prefix: prefix("1.2.3.4/16"), ReserveLow: 2, ReserveHigh: 2}, size: 65532, first: "1.2.0.2", last: "1.2.255.253"},
		{name: "v6 masked", cfg: Config{Prefix: prefix("fd00::1:2:3:4/64"), ReserveLow: 1}, size: math.MaxUint64, first: "fd00::1", last: "fd00::ffff:ffff:ffff:ffff"},
		{name: "v4 /32", cfg: Config{Prefix: prefix("1.2.3.4/32")}, size: 1, first: "1.2.3.4", last: "1.2.3.4"},
		{name: "v4 /32 reserve low", cfg: Config{Prefix: prefix("1.2.3.4/32"), ReserveLow: 1}, err: true},
		{name: "v4 /32 reserve high", cfg: Config{Prefix: prefix("1.2.3.4/32"), ReserveHigh: 1}, err: true},
		{name: "v4 /32 reserve 2+2", cfg: Config{Prefix: prefix("1.2.3.4/32"), ReserveLow: 2, ReserveHigh: 2}, err: true},
		{name: "v4 /31", cfg: Config{Prefix: prefix("1.2.3.4/31")}, size: 2, first: "1.2.3.4", last: "1.2.3.5"},
		{name: "v4 /31 reserve low", cfg: Config{Prefix: prefix("1.2.3.4/31"), ReserveLow: 1}, size: 1, first: "1.2.3.5", last: "1.2.3.5"},
		{name: "v4 /31 reserve 1+1", cfg: Config{Prefix: prefix("1.2.3.4/31"), ReserveLow: 1, ReserveHigh: 1}, err: true},
		{name: "v4 /31 reserve 2+2", cfg: Config{Prefix: prefix("1.2.3.4/31"), ReserveLow: 2, ReserveHigh: 2}, err: true},
		{name: "v6 /128", cfg: Config{Prefix: prefix("fd00::1/128")}, size: 1, first: "fd00::1", last: "fd00::1"},
		{name: "v6 /128 reserve 2+2", cfg: Config{Prefix: prefix("fd00::1/128"), ReserveLow: 2, ReserveHigh: 2}, err: true},
		{name: "v6 /127 reserve high", cfg: Config{Prefix: prefix("fd00::/127"), ReserveHigh: 1}, size: 1, first: "fd00::", last: "fd00::"},
		{name: "v4 /30 all reserved", cfg: Config{Prefix: prefix("1.2.3.0/30"), ReserveLow: 1, ReserveHigh: 1,
			Reserved: []netip.Addr{addr("1.2.3.1"), addr("1.2.3.2")}}, err: true},
		{name: "v4 reserved dedup and ignored", cfg: Config{Prefix: prefix("10.0.0.0/24"), ReserveLow: 2, ReserveHigh: 2,
			Reserved: []netip.Addr{addr("10.0.0.5"), addr("10.0.0.5"), addr("10.0.0.1"), addr("10.0.0.255"), addr("10.0.1.5"), addr("fd00::5"), {}}},
			size: 251, first: "10.0.0.2", last: "10.0.0.253"},
		{name: "v4 /0", cfg: Config{Prefix: prefix("0.0.0.0/0"), ReserveLow: 2, ReserveHigh: 2}, size: 1<<32 - 4, first: "0.0.0.2", last: "255.255.255.253"},
		{name: "v4 reserve high too big", cfg: Config{Prefix: prefix("10.0.0.0/24"), ReserveHigh: 256}, err: true},
		{name: "v6 /64", cfg: Config{Prefix: prefix("fd00::/64"), ReserveLow: 2, ReserveHigh: 2}, size: math.MaxUint64 - 3, first: "fd00::2", last: "fd00::ffff:ffff:ffff:fffd"},
		{name: "v6 /64 whole", cfg: Config{Prefix: prefix("fd00::/64")}, size: math.MaxUint64, first: "fd00::", last: "fd00::ffff:ffff:ffff:ffff"},
		{name: "v6 /64 whole, one reserved", cfg: Config{Prefix: prefix("fd00::/64"), Reserved: []netip.Addr{addr("fd00::7")}}, size: math.MaxUint64, first: "fd00::", last: "fd00::ffff:ffff:ffff:ffff"},
		{name: "v6 /48 capped", cfg: Config{Prefix: prefix("fd00:1::/48"), ReserveLow: 2, ReserveHigh: 2}, size: math.MaxUint64 - 1, first: "fd00:1::2", last: "fd00:1::ffff:ffff:ffff:ffff"},
		{name: "v6 /0 capped", cfg: Config{Prefix: prefix("::/0"), ReserveHigh: math.MaxUint64}, size: math.MaxUint64, first: "::", last: "::ffff:ffff:ffff:ffff"},
		{name: "v6 /64 reserve low max", cfg: Config{Prefix: prefix("fd00::/64"), ReserveLow: math.MaxUint64}, size: 1, first: "fd00::ffff:ffff:ffff:ffff", last: "fd00::ffff:ffff:ffff:ffff"},
		{name: "v6 /64 reserve high max", cfg: Config{Prefix: prefix("fd00::/64"), ReserveHigh: math.MaxUint64}, size: 1, first: "fd00::", last: "fd00::"},
		{name: "v6 /64 reserve all", cfg: Config{Prefix: prefix("fd00::/64"), ReserveLow: 1, ReserveHigh: math.MaxUint64}, err: true},
		{name: "invalid prefix", cfg: Config{}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p, err := New(tc.cfg)
			if verr := tc.cfg.Validate(); err == nil {
				g.Expect(verr).NotTo(HaveOccurred())
			} else {
				g.Expect(verr).To(MatchError(err.Error()))
			}
			if tc.err {
				g.Expect(err).To(HaveOccurred())
				g.Expect(p).To(BeNil())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Prefix()).To(Equal(tc.cfg.Prefix.Masked()))
			g.Expect(p.Size()).To(Equal(tc.size))
			g.Expect(p.Used()).To(BeZero())
			g.Expect(p.Free()).To(Equal(tc.size))
			first, last := addr(tc.first), addr(tc.last)
			g.Expect(p.Contains(first)).To(BeTrue())
			g.Expect(p.Contains(last)).To(BeTrue())
			g.Expect(p.Contains(first.Prev())).To(BeFalse())
			g.Expect(p.Contains(last.Next())).To(BeFalse())
			a, err := p.Allocate()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(first), "the first Allocate gives the first address of the window")
		})
	}
}

// TestNextFit is the example of the design: a released address is not
// reused before the cursor wraps around.
func TestNextFit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, prefix string
		want         []string // .10 .11 (release .11) .12 .13 .11
	}{
		{name: "v4", prefix: "1.2.128.8/29", want: []string{"1.2.128.10", "1.2.128.11", "1.2.128.12", "1.2.128.13", "1.2.128.11"}},
		{name: "v6", prefix: "fd00:1:2::8/125", want: []string{"fd00:1:2::a", "fd00:1:2::b", "fd00:1:2::c", "fd00:1:2::d", "fd00:1:2::b"}},
	} {
		for _, l := range []layout{denseLayout, sparseLayout} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				p, err := newPool(Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2}, l)
				g.Expect(err).NotTo(HaveOccurred())
				next := func() netip.Addr {
					a, err := p.Allocate()
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(p.Cursor()).To(Equal(a))
					return a
				}
				g.Expect(next()).To(Equal(addr(tc.want[0])))
				g.Expect(next()).To(Equal(addr(tc.want[1])))
				g.Expect(p.Release(addr(tc.want[1]))).To(Succeed())
				g.Expect(next()).To(Equal(addr(tc.want[2])), "released address not reused before the wrap")
				g.Expect(next()).To(Equal(addr(tc.want[3])))
				g.Expect(next()).To(Equal(addr(tc.want[4])), "wrapped around")
				_, err = p.Allocate()
				g.Expect(err).To(MatchError(ErrPoolExhausted))
				g.Expect(err.Error()).To(ContainSubstring(p.Prefix().String()))
				g.Expect(p.Used()).To(Equal(uint64(4)))
				g.Expect(p.Free()).To(BeZero())
			})
		}
	}
}

func TestWrapAround(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, prefix, top, first string
	}{
		{name: "v4 /24", prefix: "10.0.0.0/24", top: "10.0.0.253", first: "10.0.0.2"},
		{name: "v6 /112", prefix: "fd00::/112", top: "fd00::fffd", first: "fd00::2"},
		{name: "v4 /16 sparse-sized", prefix: "10.0.0.0/11", top: "10.31.255.253", first: "10.0.0.2"},
		{name: "v6 /64", prefix: "fd00::/64", top: "fd00::ffff:ffff:ffff:fffd", first: "fd00::2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p := mustPool(t, Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2})
			g.Expect(p.SetCursor(addr(tc.top).Prev())).To(Succeed())
			g.Expect(p.Allocate()).To(Equal(addr(tc.top)))
			g.Expect(p.Allocate()).To(Equal(addr(tc.first)), "wraps to the start of the window")
			g.Expect(p.Allocate()).To(Equal(addr(tc.first).Next()))
			g.Expect(p.SetCursor(addr(tc.top).Prev())).To(Succeed())
			g.Expect(p.Allocate()).To(Equal(addr(tc.first).Next().Next()), "skips the taken top and the taken start")
		})
	}
}

func TestFull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		size int
	}{
		{name: "v4 /24", cfg: Config{Prefix: prefix("10.0.0.0/24"), ReserveLow: 2, ReserveHigh: 2}, size: 252},
		{name: "v6 /116", cfg: Config{Prefix: prefix("fd00::/116"), ReserveLow: 1, Reserved: []netip.Addr{addr("fd00::100")}}, size: 4094},
		{name: "v4 /32", cfg: Config{Prefix: prefix("10.0.0.7/32")}, size: 1},
		{name: "v6 /128", cfg: Config{Prefix: prefix("fd00::7/128")}, size: 1},
		{name: "v4 /20 two full chunks", cfg: Config{Prefix: prefix("10.0.0.0/19")}, size: 8192},
	} {
		for _, l := range []layout{denseLayout, sparseLayout} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				p, err := newPool(tc.cfg, l)
				g.Expect(err).NotTo(HaveOccurred())
				got := allocateAll(t, p)
				g.Expect(got).To(HaveLen(tc.size))
				g.Expect(p.Used()).To(Equal(p.Size()))
				_, err = p.AllocateOffset()
				g.Expect(err).To(MatchError(ErrPoolExhausted))
				// Release one in the middle: it is the only one left.
				mid := got[len(got)/2]
				g.Expect(p.Release(mid)).To(Succeed())
				g.Expect(p.Allocate()).To(Equal(mid))
				_, err = p.Allocate()
				g.Expect(err).To(MatchError(ErrPoolExhausted))
			})
		}
	}
}

func TestReservedSkipped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, prefix string
		reserved     []string
		want         []string // the whole allocation order
	}{
		{name: "v4", prefix: "10.0.0.0/29", reserved: []string{"10.0.0.3", "10.0.0.4", "10.0.0.7", "10.0.0.1", "10.9.9.9"},
			want: []string{"10.0.0.2", "10.0.0.5", "10.0.0.6"}},
		{name: "v6", prefix: "fd00::/125", reserved: []string{"fd00::3", "fd00::4", "fd00::7", "fd00::1", "fd01::3"},
			want: []string{"fd00::2", "fd00::5", "fd00::6"}},
	} {
		for _, l := range []layout{denseLayout, sparseLayout} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				cfg := Config{Prefix: prefix(tc.prefix), ReserveLow: 2}
				for _, r := range tc.reserved {
					cfg.Reserved = append(cfg.Reserved, addr(r))
				}
				p, err := newPool(cfg, l)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.Size()).To(Equal(uint64(len(tc.want))))
				var got []string
				for _, a := range allocateAll(t, p) {
					got = append(got, a.String())
				}
				g.Expect(got).To(Equal(tc.want))
				r := addr(tc.reserved[0])
				g.Expect(p.Contains(r)).To(BeTrue(), "a reserved address is inside the window")
				g.Expect(p.IsAllocated(r)).To(BeFalse())
				g.Expect(p.AllocateAddr(r)).To(MatchError(ErrReserved))
				err = p.Release(r)
				g.Expect(err).To(MatchError(ErrReserved))
				g.Expect(err).To(MatchError(ErrNotAllocated))
				g.Expect(p.Used()).To(Equal(p.Size()))
				p.Range(func(a netip.Addr) bool {
					g.Expect(a).NotTo(Equal(r))
					return true
				})
			})
		}
	}
}

func TestOffsets(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := mustPool(t, Config{Prefix: prefix("10.0.0.0/24"), ReserveLow: 2, ReserveHigh: 2})
	g.Expect(p.AddrAt(0)).To(Equal(addr("10.0.0.0")))
	g.Expect(p.AddrAt(255)).To(Equal(addr("10.0.0.255")))
	g.Expect(p.AddrAt(256).IsValid()).To(BeFalse())
	g.Expect(p.AddrAt(math.MaxUint64).IsValid()).To(BeFalse())
	off, ok := p.OffsetOf(addr("10.0.0.255"))
	g.Expect(ok).To(BeTrue())
	g.Expect(off).To(Equal(uint64(255)))
	_, ok = p.OffsetOf(addr("10.0.1.0"))
	g.Expect(ok).To(BeFalse())

	g.Expect(p.AllocateOffset()).To(Equal(uint64(2)))
	g.Expect(p.AllocateAtOffset(2)).To(MatchError(ErrTaken))
	g.Expect(p.AllocateAtOffset(1)).To(MatchError(ErrOutOfRange))
	g.Expect(p.AllocateAtOffset(254)).To(MatchError(ErrOutOfRange))
	g.Expect(p.AllocateAtOffset(253)).To(Succeed())
	g.Expect(p.ReleaseOffset(253)).To(Succeed())
	g.Expect(p.ReleaseOffset(253)).To(MatchError(ErrNotAllocated))
	g.Expect(p.ReleaseOffset(math.MaxUint64)).To(MatchError(ErrOutOfRange))
	err := p.AllocateAtOffset(2)
	g.Expect(err.Error()).To(ContainSubstring("offset 2 (10.0.0.2)"))
}

func TestSetCursor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, prefix, cursor, next string
		err                        error
	}{
		{name: "v4 inside", prefix: "10.0.0.0/24", cursor: "10.0.0.100", next: "10.0.0.101"},
		{name: "v6 inside", prefix: "fd00::/120", cursor: "fd00::64", next: "fd00::65"},
		{name: "v4 network", prefix: "10.0.0.0/24", cursor: "10.0.0.0", next: "10.0.0.2"},
		{name: "v6 network", prefix: "fd00::/120", cursor: "fd00::", next: "fd00::2"},
		{name: "v4 last of window", prefix: "10.0.0.0/24", cursor: "10.0.0.253", next: "10.0.0.2"},
		{name: "v4 broadcast", prefix: "10.0.0.0/24", cursor: "10.0.0.255", next: "10.0.0.2"},
		{name: "v6 top", prefix: "fd00::/120", cursor: "fd00::ff", next: "fd00::2"},
		{name: "v4 mapped", prefix: "10.0.0.0/24", cursor: "::ffff:10.0.0.7", next: "10.0.0.8"},
		{name: "v4 outside", prefix: "10.0.0.0/24", cursor: "10.0.1.7", err: ErrOutOfRange},
		{name: "v6 outside", prefix: "fd00::/120", cursor: "fd00::1:7", err: ErrOutOfRange},
		{name: "v6 beyond the cap", prefix: "fd00::/48", cursor: "fd00:0:0:1::", err: ErrOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p := mustPool(t, Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2})
			before := p.Cursor()
			err := p.SetCursor(addr(tc.cursor))
			if tc.err != nil {
				g.Expect(err).To(MatchError(tc.err))
				g.Expect(p.Cursor()).To(Equal(before))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Cursor()).To(Equal(addr(tc.cursor).Unmap()))
			g.Expect(p.Allocate()).To(Equal(addr(tc.next)))
		})
	}
}

func TestInitialCursor(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := mustPool(t, Config{Prefix: prefix("10.0.0.0/24"), ReserveLow: 2, ReserveHigh: 2})
	g.Expect(p.Cursor()).To(Equal(addr("10.0.0.1")))
	p = mustPool(t, Config{Prefix: prefix("10.0.0.0/24"), ReserveHigh: 2})
	g.Expect(p.Cursor()).To(Equal(addr("10.0.0.253")))
	g.Expect(p.Allocate()).To(Equal(addr("10.0.0.0")))
}

func TestRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		prefix string
		addrs  []string // allocation order; Range gives them sorted
	}{
		{name: "v4", prefix: "10.0.0.0/16", addrs: []string{"10.0.200.1", "10.0.0.5", "10.0.16.0", "10.0.15.255", "10.0.0.2", "10.0.255.253"}},
		{name: "v6", prefix: "fd00::/64", addrs: []string{"fd00::ffff:ffff:ffff:fffd", "fd00::5", "fd00::1:0:0", "fd00::1000", "fd00::fff", "fd00::2"}},
	} {
		for _, l := range []layout{denseLayout, sparseLayout} {
			if l == denseLayout && tc.name == "v6" {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				p, err := newPool(Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2,
					Reserved: []netip.Addr{addr(tc.addrs[1]).Next()}}, l)
				g.Expect(err).NotTo(HaveOccurred())
				var want []netip.Addr
				for _, s := range tc.addrs {
					g.Expect(p.AllocateAddr(addr(s))).To(Succeed())
					want = append(want, addr(s))
				}
				var got []netip.Addr
				p.Range(func(a netip.Addr) bool { got = append(got, a); return true })
				g.Expect(got).To(HaveLen(len(want)))
				g.Expect(got).To(ConsistOf(want))
				for i := 1; i < len(got); i++ {
					g.Expect(got[i-1].Less(got[i])).To(BeTrue(), "ascending")
				}
				n := 0
				p.Range(func(netip.Addr) bool { n++; return n < 2 })
				g.Expect(n).To(Equal(2), "Range stops when fn returns false")
			})
		}
	}
}

func TestReset(t *testing.T) {
	t.Parallel()
	for _, l := range []layout{denseLayout, sparseLayout} {
		g := NewWithT(t)
		p, err := newPool(Config{Prefix: prefix("10.0.0.0/29"), ReserveLow: 2, ReserveHigh: 2, Reserved: []netip.Addr{addr("10.0.0.3")}}, l)
		g.Expect(err).NotTo(HaveOccurred())
		allocateAll(t, p)
		g.Expect(p.Used()).To(Equal(uint64(3)))
		p.Reset()
		g.Expect(p.Used()).To(BeZero())
		g.Expect(p.Free()).To(Equal(uint64(3)))
		g.Expect(p.Cursor()).To(Equal(addr("10.0.0.1")))
		n := 0
		p.Range(func(netip.Addr) bool { n++; return true })
		g.Expect(n).To(BeZero())
		g.Expect(p.AllocateAddr(addr("10.0.0.3"))).To(MatchError(ErrReserved), "reserved again after Reset")
		g.Expect(p.Allocate()).To(Equal(addr("10.0.0.2")))
		g.Expect(p.Allocate()).To(Equal(addr("10.0.0.4")))
	}
}
