package ipalloc

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func TestAllocateAddrErrors(t *testing.T) {
	t.Parallel()
	v4 := Config{Prefix: prefix("10.0.0.0/24"), ReserveLow: 2, ReserveHigh: 2, Reserved: []netip.Addr{addr("10.0.0.9")}}
	v6 := Config{Prefix: prefix("fd00::/120"), ReserveLow: 2, ReserveHigh: 2, Reserved: []netip.Addr{addr("fd00::9")}}
	for _, tc := range []struct {
		name string
		cfg  Config
		addr netip.Addr
		want error // nil: succeeds
	}{
		{name: "v4 first", cfg: v4, addr: addr("10.0.0.2")},
		{name: "v6 first", cfg: v6, addr: addr("fd00::2")},
		{name: "v4 last", cfg: v4, addr: addr("10.0.0.253")},
		{name: "v6 last", cfg: v6, addr: addr("fd00::fd")},
		{name: "v4 mapped", cfg: v4, addr: addr("::ffff:10.0.0.20")},
		{name: "v4 taken", cfg: v4, addr: addr("10.0.0.10"), want: ErrTaken},
		{name: "v6 taken", cfg: v6, addr: addr("fd00::a"), want: ErrTaken},
		{name: "v4 mapped taken", cfg: v4, addr: addr("::ffff:10.0.0.10"), want: ErrTaken},
		{name: "v4 reserved", cfg: v4, addr: addr("10.0.0.9"), want: ErrReserved},
		{name: "v6 reserved", cfg: v6, addr: addr("fd00::9"), want: ErrReserved},
		{name: "v4 network", cfg: v4, addr: addr("10.0.0.0"), want: ErrOutOfRange},
		{name: "v6 network", cfg: v6, addr: addr("fd00::"), want: ErrOutOfRange},
		{name: "v4 gateway", cfg: v4, addr: addr("10.0.0.1"), want: ErrOutOfRange},
		{name: "v6 gateway", cfg: v6, addr: addr("fd00::1"), want: ErrOutOfRange},
		{name: "v4 broadcast", cfg: v4, addr: addr("10.0.0.255"), want: ErrOutOfRange},
		{name: "v6 top", cfg: v6, addr: addr("fd00::ff"), want: ErrOutOfRange},
		{name: "v4 NAT loopback", cfg: v4, addr: addr("10.0.0.254"), want: ErrOutOfRange},
		{name: "v4 other prefix", cfg: v4, addr: addr("10.0.1.10"), want: ErrOutOfRange},
		{name: "v6 other prefix", cfg: v6, addr: addr("fd00::1:a"), want: ErrOutOfRange},
		{name: "v4 in v6 pool", cfg: v6, addr: addr("10.0.0.10"), want: ErrOutOfRange},
		{name: "v6 in v4 pool", cfg: v4, addr: addr("fd00::a"), want: ErrOutOfRange},
		{name: "v6 zoned", cfg: v6, addr: addr("fd00::20%eth0"), want: ErrOutOfRange},
		{name: "v4 mapped zoned", cfg: v4, addr: addr("::ffff:10.0.0.20%eth0"), want: ErrOutOfRange},
		{name: "v4 zero addr", cfg: v4, addr: netip.Addr{}, want: ErrOutOfRange},
		{name: "v6 zero addr", cfg: v6, addr: netip.Addr{}, want: ErrOutOfRange},
	} {
		for _, l := range []layout{denseLayout, sparseLayout} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				p, err := newPool(tc.cfg, l)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.AllocateAtOffset(10)).To(Succeed())
				cursor := p.Cursor()
				err = p.AllocateAddr(tc.addr)
				if tc.want == nil {
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(p.IsAllocated(tc.addr)).To(BeTrue())
					g.Expect(p.Used()).To(Equal(uint64(2)))
				} else {
					g.Expect(err).To(MatchError(tc.want))
					g.Expect(err.Error()).To(ContainSubstring(p.Prefix().String()))
					g.Expect(p.Used()).To(Equal(uint64(1)))
				}
				g.Expect(p.Cursor()).To(Equal(cursor), "AllocateAddr does not move the cursor")
			})
		}
	}
}

func TestReleaseErrors(t *testing.T) {
	t.Parallel()
	v4 := Config{Prefix: prefix("10.0.0.0/24"), ReserveLow: 2, ReserveHigh: 2, Reserved: []netip.Addr{addr("10.0.0.9")}}
	v6 := Config{Prefix: prefix("fd00::/120"), ReserveLow: 2, ReserveHigh: 2, Reserved: []netip.Addr{addr("fd00::9")}}
	for _, tc := range []struct {
		name string
		cfg  Config
		addr netip.Addr
		want []error // nil: succeeds
	}{
		{name: "v4 allocated", cfg: v4, addr: addr("10.0.0.10")},
		{name: "v6 allocated", cfg: v6, addr: addr("fd00::a")},
		{name: "v4 mapped allocated", cfg: v4, addr: addr("::ffff:10.0.0.10")},
		{name: "v4 free", cfg: v4, addr: addr("10.0.0.11"), want: []error{ErrNotAllocated}},
		{name: "v6 free", cfg: v6, addr: addr("fd00::b"), want: []error{ErrNotAllocated}},
		{name: "v4 reserved", cfg: v4, addr: addr("10.0.0.9"), want: []error{ErrNotAllocated, ErrReserved}},
		{name: "v6 reserved", cfg: v6, addr: addr("fd00::9"), want: []error{ErrNotAllocated, ErrReserved}},
		{name: "v4 gateway", cfg: v4, addr: addr("10.0.0.1"), want: []error{ErrOutOfRange}},
		{name: "v6 top", cfg: v6, addr: addr("fd00::ff"), want: []error{ErrOutOfRange}},
		{name: "v4 other prefix", cfg: v4, addr: addr("10.1.0.10"), want: []error{ErrOutOfRange}},
		{name: "v6 zero addr", cfg: v6, addr: netip.Addr{}, want: []error{ErrOutOfRange}},
	} {
		for _, l := range []layout{denseLayout, sparseLayout} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				p, err := newPool(tc.cfg, l)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(p.AllocateAtOffset(10)).To(Succeed())
				err = p.Release(tc.addr)
				if tc.want == nil {
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(p.Used()).To(BeZero())
					g.Expect(p.Release(tc.addr)).To(MatchError(ErrNotAllocated), "a second release")
					return
				}
				for _, w := range tc.want {
					g.Expect(err).To(MatchError(w))
				}
				g.Expect(p.Used()).To(Equal(uint64(1)))
			})
		}
	}
}

func TestZeroPool(t *testing.T) {
	t.Parallel()
	for name, p := range map[string]*Pool{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			a := addr("10.0.0.1")
			_, err := p.Allocate()
			g.Expect(err).To(MatchError(ErrPoolExhausted))
			_, err = p.AllocateOffset()
			g.Expect(err).To(MatchError(ErrPoolExhausted))
			g.Expect(p.AllocateAddr(a)).To(MatchError(ErrOutOfRange))
			g.Expect(p.AllocateAtOffset(1)).To(MatchError(ErrOutOfRange))
			g.Expect(p.Release(a)).To(MatchError(ErrOutOfRange))
			g.Expect(p.ReleaseOffset(1)).To(MatchError(ErrOutOfRange))
			g.Expect(p.SetCursor(a)).To(MatchError(ErrOutOfRange))
			g.Expect(p.IsAllocated(a)).To(BeFalse())
			g.Expect(p.Contains(a)).To(BeFalse())
			g.Expect(p.Prefix()).To(Equal(netip.Prefix{}))
			g.Expect(p.Cursor()).To(Equal(netip.Addr{}))
			g.Expect(p.AddrAt(1)).To(Equal(netip.Addr{}))
			_, ok := p.OffsetOf(a)
			g.Expect(ok).To(BeFalse())
			g.Expect(p.Size() + p.Used() + p.Free()).To(BeZero())
			p.Range(func(netip.Addr) bool { t.Fatal("Range on an empty pool"); return false })
			p.Reset()
		})
	}
}
