package cidr_test

import (
	"math"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/cidr"
)

// pfx parses a prefix without masking it (the package masks).
func pfx(s string) netip.Prefix {
	if s == "" {
		return netip.Prefix{}
	}
	return netip.MustParsePrefix(s)
}

func addr(s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	return netip.MustParseAddr(s)
}

func TestHostBits(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   int
	}{
		{"10.1.0.0/16", 16}, {"fd00::/64", 64},
		{"0.0.0.0/0", 32}, {"::/0", 128},
		{"1.2.3.4/32", 0}, {"fd00::1/128", 0},
		{"", -1},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(cidr.HostBits(pfx(tc.prefix))).To(Equal(tc.want))
		})
	}
}

func TestAddr(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		n            uint64
		want         string
		err          error
		msg          string
	}{
		{"v4 first", "10.1.5.0/24", 0, "10.1.5.0", nil, ""},
		{"v6 first", "fd00::/120", 0, "fd00::", nil, ""},
		{"v4 gateway", "10.1.5.0/24", 1, "10.1.5.1", nil, ""},
		{"v6 gateway", "fd00::/120", 1, "fd00::1", nil, ""},
		{"v4 host bits ignored", "10.1.5.77/24", 2, "10.1.5.2", nil, ""},
		{"v6 host bits ignored", "fd00::77/120", 2, "fd00::2", nil, ""},
		{"v4 last", "10.1.5.0/24", 255, "10.1.5.255", nil, ""},
		{"v6 last", "fd00::/120", 255, "fd00::ff", nil, ""},
		{"v4 one past", "10.1.5.0/24", 256, "", cidr.ErrOutOfRange, "address at offset 256 of 10.1.5.0/24: it has 256 addresses"},
		{"v6 one past", "fd00::/120", 256, "", cidr.ErrOutOfRange, "address at offset 256 of fd00::/120: it has 256 addresses"},
		{"v4 /32", "1.2.3.4/32", 0, "1.2.3.4", nil, ""},
		{"v6 /128", "fd00::1/128", 0, "fd00::1", nil, ""},
		{"v4 /32 past", "1.2.3.4/32", 1, "", cidr.ErrOutOfRange, "it has 1 addresses"},
		{"v6 /128 past", "fd00::1/128", 1, "", cidr.ErrOutOfRange, "it has 1 addresses"},
		{"v4 /0 top", "0.0.0.0/0", math.MaxUint32, "255.255.255.255", nil, ""},
		{"v6 /0 max offset", "::/0", math.MaxUint64, "::ffff:ffff:ffff:ffff", nil, ""},
		{"v4 /0 past", "0.0.0.0/0", math.MaxUint32 + 1, "", cidr.ErrOutOfRange, "it has 4294967296 addresses"},
		{"v6 /64 max", "fd00:1::/64", math.MaxUint64, "fd00:1::ffff:ffff:ffff:ffff", nil, ""},
		{"v6 /65 past", "fd00:1::/65", 1 << 63, "", cidr.ErrOutOfRange, "it has 9223372036854775808 addresses"},
		{"v6 /63 crosses a word", "fd00:1::/63", math.MaxUint64, "fd00:1::ffff:ffff:ffff:ffff", nil, ""},
		{"IPv4-mapped prefix is IPv6", "::ffff:10.0.0.0/104", 5, "::ffff:10.0.0.5", nil, ""},
		{"invalid prefix", "", 0, "", cidr.ErrInvalid, "of invalid Prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a, err := cidr.Addr(pfx(tc.prefix), tc.n)
			if tc.err != nil {
				g.Expect(err).To(MatchError(tc.err))
				g.Expect(err).To(MatchError(ContainSubstring(tc.msg)))
				g.Expect(a.IsValid()).To(BeFalse())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(addr(tc.want)))
		})
	}
}

func TestOffset(t *testing.T) {
	for _, tc := range []struct {
		name, prefix, addr string
		want               uint64
		err                error
		msg                string
	}{
		{"v4", "10.1.5.0/24", "10.1.5.7", 7, nil, ""},
		{"v6", "fd00::/120", "fd00::7", 7, nil, ""},
		{"v4 host bits ignored", "10.1.5.9/24", "10.1.5.255", 255, nil, ""},
		{"v6 host bits ignored", "fd00::9/120", "fd00::ff", 255, nil, ""},
		{"v4 below", "10.1.5.0/24", "10.1.4.255", 0, cidr.ErrOutOfRange, "offset of 10.1.4.255: outside 10.1.5.0/24"},
		{"v6 below", "fd00::100/120", "fd00::ff", 0, cidr.ErrOutOfRange, "offset of fd00::ff: outside fd00::100/120"},
		{"v4 above", "10.1.5.0/24", "10.1.6.0", 0, cidr.ErrOutOfRange, "outside"},
		{"v6 above", "fd00::/120", "fd00::100", 0, cidr.ErrOutOfRange, "outside"},
		{"v4 /32", "1.2.3.4/32", "1.2.3.4", 0, nil, ""},
		{"v6 /128", "fd00::1/128", "fd00::1", 0, nil, ""},
		{"v4 /0", "0.0.0.0/0", "255.255.255.255", math.MaxUint32, nil, ""},
		{"v6 /0 low word", "::/0", "::ffff:ffff:ffff:ffff", math.MaxUint64, nil, ""},
		{"v6 /0 overflow", "::/0", "::1:0:0:0:0", 0, cidr.ErrOverflow, "offset of 0:0:0:1:: in ::/0: 2^64 or more"},
		{"v6 /64 top", "fd00:1::/64", "fd00:1::ffff:ffff:ffff:ffff", math.MaxUint64, nil, ""},
		{"v6 /63 overflow", "fd00:1::/63", "fd00:1:0:1::", 0, cidr.ErrOverflow, "2^64 or more"},
		{"IPv4-mapped in v4 prefix", "10.1.5.0/24", "::ffff:10.1.5.9", 9, nil, ""},
		{"IPv4 in mapped prefix", "::ffff:10.1.5.0/120", "10.1.5.9", 0, cidr.ErrOutOfRange, "outside"},
		{"IPv4-mapped in mapped prefix", "::ffff:10.1.5.0/120", "::ffff:10.1.5.9", 9, nil, ""},
		{"v6 in v4 prefix", "0.0.0.0/0", "::1", 0, cidr.ErrOutOfRange, "outside"},
		{"v4 in v6 prefix", "::/0", "1.2.3.4", 0, cidr.ErrOutOfRange, "outside"},
		{"zone", "fe80::/64", "fe80::1%eth0", 0, cidr.ErrOutOfRange, "offset of fe80::1%eth0: outside fe80::/64"},
		{"zone on mapped", "10.1.5.0/24", "::ffff:10.1.5.9%eth0", 0, cidr.ErrOutOfRange, "outside"},
		{"invalid prefix", "", "1.2.3.4", 0, cidr.ErrInvalid, "prefix invalid Prefix"},
		{"invalid address", "10.0.0.0/8", "", 0, cidr.ErrInvalid, "address invalid IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			off, err := cidr.Offset(pfx(tc.prefix), addr(tc.addr))
			if tc.err != nil {
				g.Expect(err).To(MatchError(tc.err))
				g.Expect(err).To(MatchError(ContainSubstring(tc.msg)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(off).To(Equal(tc.want))
		})
	}
}

func TestLast(t *testing.T) {
	for _, tc := range []struct{ prefix, want string }{
		{"10.1.5.0/24", "10.1.5.255"}, {"2001::/64", "2001::ffff:ffff:ffff:ffff"},
		{"10.1.5.9/29", "10.1.5.15"}, {"fd00::9/125", "fd00::f"},
		{"0.0.0.0/0", "255.255.255.255"}, {"::/0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
		{"1.2.3.4/32", "1.2.3.4"}, {"fd00::1/128", "fd00::1"},
		{"fd00::/63", "fd00:0:0:1:ffff:ffff:ffff:ffff"}, {"fd00::/65", "fd00::7fff:ffff:ffff:ffff"},
		{"", ""},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(cidr.Last(pfx(tc.prefix))).To(Equal(addr(tc.want)))
		})
	}
}

func TestSubnet(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		bits         int
		i            uint64
		want         string
		err          error
		msg          string
	}{
		{"v4", "1.2.128.0/17", 29, 5, "1.2.128.40/29", nil, ""},
		{"v6", "fe10:f00d::/90", 120, 5, "fe10:f00d::500/120", nil, ""},
		{"v4 middle", "10.0.0.0/8", 16, 5, "10.5.0.0/16", nil, ""},
		{"v6 middle", "2001:db8::/32", 48, 5, "2001:db8:5::/48", nil, ""},
		{"v4 first", "10.0.0.0/8", 16, 0, "10.0.0.0/16", nil, ""},
		{"v6 first", "2001:db8::/32", 48, 0, "2001:db8::/48", nil, ""},
		{"v4 last", "10.0.0.0/8", 16, 255, "10.255.0.0/16", nil, ""},
		{"v6 last", "2001:db8::/32", 48, 0xffff, "2001:db8:ffff::/48", nil, ""},
		{"v4 one past", "10.0.0.0/8", 16, 256, "", cidr.ErrOutOfRange, "subnet /16 number 256 of 10.0.0.0/8: it has 256 of them"},
		{"v6 one past", "2001:db8::/32", 48, 0x10000, "", cidr.ErrOutOfRange, "subnet /48 number 65536 of 2001:db8::/32: it has 65536 of them"},
		{"v4 itself", "10.1.2.3/8", 8, 0, "10.0.0.0/8", nil, ""},
		{"v6 itself", "fd00::1/64", 64, 0, "fd00::/64", nil, ""},
		{"v4 itself, 1", "10.0.0.0/8", 8, 1, "", cidr.ErrOutOfRange, "it has 1 of them"},
		{"v4 halves, 2", "10.0.0.0/8", 9, 2, "", cidr.ErrOutOfRange, "subnet /9 number 2 of 10.0.0.0/8: it has 2 of them"},
		{"v6 halves, 2", "fd00::/64", 65, 2, "", cidr.ErrOutOfRange, "subnet /65 number 2 of fd00::/64: it has 2 of them"},
		{"v4 host routes", "10.0.0.0/8", 32, 1, "10.0.0.1/32", nil, ""},
		{"v6 host routes", "fd00::/64", 128, 257, "fd00::101/128", nil, ""},
		{"v4 /0 halves", "0.0.0.0/0", 1, 1, "128.0.0.0/1", nil, ""},
		{"v6 /0 halves", "::/0", 1, 1, "8000::/1", nil, ""},
		{"v6 word boundary /64", "::/0", 64, 1, "0:0:0:1::/64", nil, ""},
		{"v6 word boundary /63", "::/0", 63, 3, "0:0:0:6::/63", nil, ""},
		{"v6 word boundary /65", "::/0", 65, 3, "::1:8000:0:0:0/65", nil, ""},
		{"v6 64-bit numbers", "::/0", 64, math.MaxUint64, "ffff:ffff:ffff:ffff::/64", nil, ""},
		{"v6 more than 2^64 subnets", "::/0", 128, math.MaxUint64, "::ffff:ffff:ffff:ffff/128", nil, ""},
		{"contivCIDR split v4", "10.128.0.0/14", 23, 257, "10.130.2.0/23", nil, ""},
		{"contivCIDR split v6", "fe10::/64", 119, 257, "fe10::2:200/119", nil, ""},
		{"v4 longer than the family", "10.0.0.0/8", 33, 0, "", cidr.ErrInvalid, "prefix length 33: not within 8..32 of 10.0.0.0/8"},
		{"v6 longer than the family", "fd00::/64", 129, 0, "", cidr.ErrInvalid, "not within 64..128"},
		{"v4 shorter than the prefix", "10.0.0.0/8", 7, 0, "", cidr.ErrInvalid, "prefix length 7: not within 8..32"},
		{"negative length", "::/0", -1, 0, "", cidr.ErrInvalid, "prefix length -1"},
		{"IPv4-mapped prefix is IPv6", "::ffff:10.0.0.0/104", 112, 3, "::ffff:10.3.0.0/112", nil, ""},
		{"invalid prefix", "", 8, 0, "", cidr.ErrInvalid, "subnet /8 number 0: prefix invalid Prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := cidr.Subnet(pfx(tc.prefix), tc.bits, tc.i)
			if tc.err != nil {
				g.Expect(err).To(MatchError(tc.err))
				g.Expect(err).To(MatchError(ContainSubstring(tc.msg)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(pfx(tc.want)))
		})
	}
}

func TestSubnetIndex(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		bits         int
		addr         string
		want         uint64
		err          error
		msg          string
	}{
		{"v4", "1.2.128.0/17", 29, "1.2.128.40", 5, nil, ""},
		{"v6", "fe10:f00d::/90", 120, "fe10:f00d::5ff", 5, nil, ""},
		{"v4 last", "10.0.0.0/8", 16, "10.255.255.255", 255, nil, ""},
		{"v6 last", "2001:db8::/32", 48, "2001:db8:ffff:1::", 0xffff, nil, ""},
		{"v4 itself", "10.0.0.0/8", 8, "10.9.9.9", 0, nil, ""},
		{"v6 itself", "fd00::/64", 64, "fd00::9", 0, nil, ""},
		{"v4 /32 subnets", "0.0.0.0/0", 32, "255.255.255.255", math.MaxUint32, nil, ""},
		{"v6 /64 subnets of /0", "::/0", 64, "ffff:ffff:ffff:ffff::1", math.MaxUint64, nil, ""},
		{"v6 /65 subnets of /0", "::/0", 65, "8000::", 0, cidr.ErrOverflow, "/65 subnet of 8000:: in ::/0: its number is 2^64 or more"},
		{"v4 outside", "1.2.128.0/17", 29, "9.9.9.9", 0, cidr.ErrOutOfRange, "/29 subnet of 9.9.9.9: outside 1.2.128.0/17"},
		{"v6 outside", "fe10::/16", 64, "fe11::", 0, cidr.ErrOutOfRange, "outside fe10::/16"},
		{"zone", "fe80::/10", 64, "fe80::1%eth0", 0, cidr.ErrOutOfRange, "outside"},
		{"IPv4-mapped in v4", "10.0.0.0/8", 16, "::ffff:10.7.0.1", 7, nil, ""},
		{"v4 bad length", "10.0.0.0/8", 40, "10.0.0.1", 0, cidr.ErrInvalid, "prefix length 40"},
		{"v6 bad length", "fd00::/64", 60, "fd00::1", 0, cidr.ErrInvalid, "prefix length 60"},
		{"invalid address", "10.0.0.0/8", 16, "", 0, cidr.ErrInvalid, "address invalid IP"},
		{"invalid prefix", "", 16, "10.0.0.1", 0, cidr.ErrInvalid, "invalid Prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := cidr.SubnetIndex(pfx(tc.prefix), tc.bits, addr(tc.addr))
			if tc.err != nil {
				g.Expect(err).To(MatchError(tc.err))
				g.Expect(err).To(MatchError(ContainSubstring(tc.msg)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestAddSub(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		n          uint64
		add, sub   string // "" = ErrOverflow
	}{
		{"v4", "10.1.5.7", 3, "10.1.5.10", "10.1.5.4"},
		{"v6", "fd00::7", 3, "fd00::a", "fd00::4"},
		{"v4 carry", "10.1.5.255", 1, "10.1.6.0", "10.1.5.254"},
		{"v6 carry across the words", "fd00::ffff:ffff:ffff:ffff", 1, "fd00:0:0:1::", "fd00::ffff:ffff:ffff:fffe"},
		{"v6 borrow across the words", "fd00:0:0:1::", 1, "fd00:0:0:1::1", "fd00::ffff:ffff:ffff:ffff"},
		{"v4 zero", "1.2.3.4", 0, "1.2.3.4", "1.2.3.4"},
		{"v6 zero", "::", 0, "::", "::"},
		{"v4 top", "255.255.255.255", 1, "", "255.255.255.254"},
		{"v6 top", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, "", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"},
		{"v4 bottom", "0.0.0.0", 1, "0.0.0.1", ""},
		{"v6 bottom", "::", 1, "::1", ""},
		{"v4 huge", "0.0.0.1", math.MaxUint32, "", ""},
		{"v6 huge", "::1", math.MaxUint64, "::1:0:0:0:0", ""},
		{"IPv4-mapped stays IPv6", "::ffff:255.255.255.255", 1, "::1:0:0:0", "::ffff:255.255.255.254"},
		{"zone kept", "fe80::1%eth0", 1, "fe80::2%eth0", "fe80::%eth0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := addr(tc.addr)
			for _, op := range []struct {
				name string
				fn   func(netip.Addr, uint64) (netip.Addr, error)
				want string
			}{{"Add", cidr.Add, tc.add}, {"Sub", cidr.Sub, tc.sub}} {
				got, err := op.fn(a, tc.n)
				if op.want == "" {
					g.Expect(err).To(MatchError(cidr.ErrOverflow), op.name)
					g.Expect(err).To(MatchError(ContainSubstring(tc.addr)), op.name)
					continue
				}
				g.Expect(err).NotTo(HaveOccurred(), op.name)
				g.Expect(got).To(Equal(addr(op.want)), op.name)
			}
		})
	}
	g := NewWithT(t)
	_, err := cidr.Add(netip.Addr{}, 1)
	g.Expect(err).To(MatchError(cidr.ErrInvalid))
	_, err = cidr.Sub(netip.Addr{}, 1)
	g.Expect(err).To(MatchError(cidr.ErrInvalid))
}

// at is an address and its offset.
type at struct {
	addr string
	off  uint64
}

// The Block converts as Addr and Offset do, capped at 2^64-1, and reports
// misses with the zero Addr or false.
func TestBlock(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		max          uint64
		inside       []at
		outside      []string
	}{
		{"v4", "10.1.5.9/24", 255, []at{{"10.1.5.0", 0}, {"10.1.5.255", 255}, {"::ffff:10.1.5.3", 3}},
			[]string{"10.1.4.255", "10.1.6.0", "::a01:503", "::ffff:10.1.5.3%eth0", ""}},
		{"v6", "fd00::9/120", 255, []at{{"fd00::", 0}, {"fd00::ff", 255}},
			[]string{"fd00::100", "fcff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fd00::1%eth0", "0.0.0.1", ""}},
		{"v4 /32", "1.2.3.4/32", 0, []at{{"1.2.3.4", 0}}, []string{"1.2.3.5", "1.2.3.3"}},
		{"v6 /128", "fd00::1/128", 0, []at{{"fd00::1", 0}}, []string{"fd00::2", "fd00::"}},
		{"v4 /0", "0.0.0.0/0", math.MaxUint32, []at{{"0.0.0.0", 0}, {"255.255.255.255", math.MaxUint32}}, []string{"::"}},
		{"v6 /0 capped", "::/0", math.MaxUint64, []at{{"::", 0}, {"::ffff:ffff:ffff:ffff", math.MaxUint64}},
			[]string{"::1:0:0:0:0", "ffff::", "0.0.0.0"}},
		{"v6 /64", "fd00:1::/64", math.MaxUint64, []at{{"fd00:1::ffff:ffff:ffff:ffff", math.MaxUint64}},
			[]string{"fd00:1:0:1::", "fd00:0:ffff:ffff:ffff:ffff:ffff:ffff"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := cidr.NewBlock(pfx(tc.prefix))
			g.Expect(b.Prefix()).To(Equal(pfx(tc.prefix).Masked()))
			g.Expect(b.MaxOffset()).To(Equal(tc.max))
			for _, x := range tc.inside {
				off, ok := b.Offset(addr(x.addr))
				g.Expect(ok).To(BeTrue(), x.addr)
				g.Expect(off).To(Equal(x.off), x.addr)
				g.Expect(b.Addr(off)).To(Equal(addr(x.addr).Unmap()), x.addr)
			}
			for _, a := range tc.outside {
				_, ok := b.Offset(addr(a))
				g.Expect(ok).To(BeFalse(), a)
			}
			if tc.max < math.MaxUint64 {
				g.Expect(b.Addr(tc.max + 1).IsValid()).To(BeFalse())
			}
		})
	}
	g := NewWithT(t)
	var zero cidr.Block
	g.Expect(cidr.NewBlock(netip.Prefix{})).To(Equal(zero))
	_, ok := zero.Offset(addr("1.2.3.4"))
	g.Expect(ok).To(BeFalse())
	g.Expect(zero.Addr(0).IsValid()).To(BeFalse())
	g.Expect(zero.MaxOffset()).To(BeZero())
	g.Expect(zero.Prefix().IsValid()).To(BeFalse())
}
