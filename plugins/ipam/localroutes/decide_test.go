package localroutes

import (
	"net"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

// cand builds a candidate of the main table, of type unicast unless typ
// is given, through links.
func cand(dst string, links ...string) candidate {
	return candidate{dst: netip.MustParsePrefix(dst), links: links, table: unix.RT_TABLE_MAIN, typ: "unicast"}
}

func local(dst, link string) candidate {
	return candidate{dst: netip.MustParsePrefix(dst), links: []string{link}, table: unix.RT_TABLE_LOCAL, typ: "local"}
}

func typed(typ, dst string) candidate {
	return candidate{dst: netip.MustParsePrefix(dst), table: unix.RT_TABLE_MAIN, typ: typ}
}

func route(prefix, link string, table int, typ string) Route {
	return Route{Prefix: netip.MustParsePrefix(prefix), Link: link, Table: table, Type: typ}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	const (
		pool4 = "10.1.5.0/24"
		pool6 = "fd00:10:1:5::/64"
		main  = unix.RT_TABLE_MAIN
		loc   = unix.RT_TABLE_LOCAL
	)
	for _, tc := range []struct {
		name   string
		pool   string
		routes []candidate
		skip   []string
		want   []Route
	}{
		{"v4 overlap partly", pool4, []candidate{cand("10.1.5.64/28", "eth0")}, nil,
			[]Route{route("10.1.5.64/28", "eth0", main, "unicast")}},
		{"v6 overlap partly", pool6, []candidate{cand("fd00:10:1:5::40/124", "eth0")}, nil,
			[]Route{route("fd00:10:1:5::40/124", "eth0", main, "unicast")}},
		{"v4 contained address", pool4, []candidate{local("10.1.5.200/32", "eth0")}, nil,
			[]Route{route("10.1.5.200/32", "eth0", loc, "local")}},
		{"v6 contained address", pool6, []candidate{local("fd00:10:1:5::c8/128", "eth0")}, nil,
			[]Route{route("fd00:10:1:5::c8/128", "eth0", loc, "local")}},
		{"v4 host bits masked", pool4, []candidate{cand("10.1.5.77/28", "eth0")}, nil,
			[]Route{route("10.1.5.64/28", "eth0", main, "unicast")}},
		{"v6 host bits masked", pool6, []candidate{cand("fd00:10:1:5::4d/124", "eth0")}, nil,
			[]Route{route("fd00:10:1:5::40/124", "eth0", main, "unicast")}},
		{"v4 pool host bits masked", "10.1.5.9/24", []candidate{cand("10.1.5.64/28", "eth0")}, nil,
			[]Route{route("10.1.5.64/28", "eth0", main, "unicast")}},
		{"v6 pool host bits masked", "fd00:10:1:5::9/64", []candidate{cand("fd00:10:1:5::40/124", "eth0")}, nil,
			[]Route{route("fd00:10:1:5::40/124", "eth0", main, "unicast")}},
		{"v4 contains the pool", pool4, []candidate{cand("10.1.0.0/16", "eth0")}, nil, nil},
		{"v6 contains the pool", pool6, []candidate{cand("fd00:10:1::/48", "eth0")}, nil, nil},
		{"v4 equal to the pool", pool4, []candidate{cand("10.1.5.0/24", "vxlan0")}, nil, nil},
		{"v6 equal to the pool", pool6, []candidate{cand("fd00:10:1:5::/64", "vxlan0")}, nil, nil},
		{"v4 default route", pool4, []candidate{cand("0.0.0.0/0", "eth0"), typed("unreachable", "0.0.0.0/0")}, nil, nil},
		{"v6 default route", pool6, []candidate{cand("::/0", "eth0"), typed("unreachable", "::/0")}, nil, nil},
		{"v4 disjoint", pool4, []candidate{cand("10.1.6.0/24", "eth0"), local("10.1.4.255/32", "eth0")}, nil, nil},
		{"v6 disjoint", pool6, []candidate{cand("fd00:10:1:6::/64", "eth0"), local("fd00:10:1:4::1/128", "eth0")}, nil, nil},
		{"v4 pool, v6 route", pool4, []candidate{cand("::ffff:10.1.5.64/124", "eth0")}, nil, nil},
		{"v6 pool, v4 route", "::ffff:10.1.5.0/120", []candidate{cand("10.1.5.64/28", "eth0")}, nil, nil},
		{"v4 link-local", "169.0.0.0/8",
			[]candidate{cand("169.254.0.0/16", "eth0"), local("169.254.3.4/32", "eth0"), cand("169.1.0.0/16", "eth0")}, nil,
			[]Route{route("169.1.0.0/16", "eth0", main, "unicast")}},
		{"v6 link-local", "fe00::/8",
			[]candidate{cand("fe80::/64", "eth0"), local("fe80::1/128", "eth0"), cand("fe00::/16", "eth0")}, nil,
			[]Route{route("fe00::/16", "eth0", main, "unicast")}},
		{"v4 skipped link", pool4,
			[]candidate{cand("10.1.5.128/25", "vpp1"), local("10.1.5.1/32", "vpp1"), cand("10.1.5.64/28", "eth0")}, []string{"vpp1"},
			[]Route{route("10.1.5.64/28", "eth0", main, "unicast")}},
		{"v6 skipped link", pool6,
			[]candidate{cand("fd00:10:1:5::80/121", "vpp1"), local("fd00:10:1:5::1/128", "vpp1"), cand("fd00:10:1:5::40/124", "eth0")}, []string{"vpp1"},
			[]Route{route("fd00:10:1:5::40/124", "eth0", main, "unicast")}},
		{"v4 multipath", pool4,
			[]candidate{cand("10.1.5.16/28", "vpp1", "vpp2"), cand("10.1.5.32/28", "vpp1", "eth0")}, []string{"vpp1", "vpp2"},
			[]Route{route("10.1.5.32/28", "vpp1,eth0", main, "unicast")}},
		{"v6 multipath", pool6,
			[]candidate{cand("fd00:10:1:5::10/124", "vpp1", "vpp2"), cand("fd00:10:1:5::20/124", "vpp1", "eth0")}, []string{"vpp1", "vpp2"},
			[]Route{route("fd00:10:1:5::20/124", "vpp1,eth0", main, "unicast")}},
		{"v4 no link, never skipped", pool4,
			[]candidate{typed("blackhole", "10.1.5.32/27"), typed("prohibit", "10.1.5.8/29")}, []string{""},
			[]Route{route("10.1.5.8/29", "", main, "prohibit"), route("10.1.5.32/27", "", main, "blackhole")}},
		{"v6 no link, never skipped", pool6,
			[]candidate{typed("blackhole", "fd00:10:1:5::20/123"), typed("unreachable", "fd00:10:1:5::8/125")}, []string{""},
			[]Route{route("fd00:10:1:5::8/125", "", main, "unreachable"), route("fd00:10:1:5::20/123", "", main, "blackhole")}},
		{"v4 sorted, deduplicated", pool4,
			[]candidate{local("10.1.5.200/32", "eth0"), cand("10.1.5.192/28", "eth0"), cand("10.1.5.200/32", "eth1"), local("10.1.5.3/32", "eth0")}, nil,
			[]Route{route("10.1.5.3/32", "eth0", loc, "local"), route("10.1.5.192/28", "eth0", main, "unicast"), route("10.1.5.200/32", "eth1", main, "unicast")}},
		{"v6 sorted, deduplicated", pool6,
			[]candidate{local("fd00:10:1:5::c8/128", "eth0"), cand("fd00:10:1:5::c0/124", "eth0"), cand("fd00:10:1:5::c8/128", "eth1"), local("fd00:10:1:5::3/128", "eth0")}, nil,
			[]Route{route("fd00:10:1:5::3/128", "eth0", loc, "local"), route("fd00:10:1:5::c0/124", "eth0", main, "unicast"), route("fd00:10:1:5::c8/128", "eth1", main, "unicast")}},
		{"v4 no routes", pool4, nil, nil, nil},
		{"v6 no routes", pool6, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(decide(netip.MustParsePrefix(tc.pool).Masked(), tc.routes, tc.skip)).To(Equal(tc.want))
		})
	}
}

func TestToPrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   *net.IPNet
		want string // "" for an error
	}{
		{"v4", &net.IPNet{IP: net.IP{10, 1, 5, 77}, Mask: net.CIDRMask(28, 32)}, "10.1.5.64/28"},
		{"v6", &net.IPNet{IP: net.ParseIP("fd00::4d"), Mask: net.CIDRMask(124, 128)}, "fd00::40/124"},
		{"v4 in 16 bytes", &net.IPNet{IP: net.ParseIP("10.1.5.77"), Mask: net.CIDRMask(28, 32)}, "10.1.5.64/28"},
		{"v6 mapped, 16-byte mask", &net.IPNet{IP: net.ParseIP("::ffff:10.1.5.77"), Mask: net.CIDRMask(124, 128)}, "::ffff:10.1.5.64/124"},
		{"v4 default", &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, "0.0.0.0/0"},
		{"v6 default", &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, "::/0"},
		{"nil", nil, ""},
		{"v4 address, v6 mask", &net.IPNet{IP: net.IP{10, 1, 5, 0}, Mask: net.CIDRMask(24, 128)}, ""},
		{"non-canonical mask", &net.IPNet{IP: net.IP{10, 1, 5, 0}, Mask: net.IPv4Mask(255, 0, 255, 0)}, ""},
		{"no address", &net.IPNet{Mask: net.CIDRMask(24, 32)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := toPrefix(tc.in)
			if tc.want == "" {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(netip.MustParsePrefix(tc.want)))
		})
	}
}
