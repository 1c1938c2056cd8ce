package addressing

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s).Masked() }

// The worked table of spec §2.4.9 (defaults: pod 10.1.0.0/16 /24, node
// interconnect 192.168.16.0/24, vxlan 192.168.30.0/24).
func TestWorkedTable(t *testing.T) {
	g := NewWithT(t)
	pod, nodeIC, vxlan := mustPrefix("10.1.0.0/16"), mustPrefix("192.168.16.0/24"), mustPrefix("192.168.30.0/24")
	rows := []struct {
		id                 uint32
		pod, node, vxlanIP string
		nodeErr            string
	}{
		{1, "10.1.1.0/24", "192.168.16.1", "192.168.30.1", ""},
		{5, "10.1.5.0/24", "192.168.16.5", "192.168.30.5", ""},
		{255, "10.1.255.0/24", "192.168.16.255", "192.168.30.255", ""},
		{256, "10.1.0.0/24", "", "", "no free address for nodeID 256"},
		{257, "", "", "", "nodeID is out of the valid range 257 > 256"},
	}
	for _, r := range rows {
		sub, err := Dissect(pod, 24, r.id)
		if r.pod == "" {
			g.Expect(err).To(MatchError(ErrNodeIDRange), "id %d", r.id)
		} else {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sub.String()).To(Equal(r.pod), "id %d", r.id)
		}
		ip, err := NodeAddress(nodeIC, r.id, netip.Addr{})
		vip, verr := NodeAddress(vxlan, r.id, netip.Addr{})
		if r.nodeErr != "" {
			g.Expect(err).To(MatchError(ContainSubstring(r.nodeErr)))
			g.Expect(verr).To(MatchError(ContainSubstring(r.nodeErr)))
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ip.String()).To(Equal(r.node))
		g.Expect(vip.String()).To(Equal(r.vxlanIP))
	}
}

func TestDissect(t *testing.T) {
	g := NewWithT(t)
	cases := []struct {
		cluster string
		oneNode int
		id      uint32
		want    string
		err     string
	}{
		{"1.2.128.0/17", 29, 1, "1.2.128.8/29", ""},
		{"1.2.128.0/17", 29, 5, "1.2.128.40/29", ""},
		{"1.4.1.0/24", 28, 16, "1.4.1.0/28", ""}, // the highest ID wraps to subnet 0
		{"1.4.1.0/24", 28, 17, "", "does not fit"},
		{"fe10:f00d::/90", 120, 5, "fe10:f00d::500/120", ""},
		{"2001::/48", 60, 1, "2001:0:0:10::/60", ""},
		{"1.2.3.0/24", 24, 1, "", "must be higher than the cluster-wide subnet prefix length (24)"},
		{"1.2.3.0/24", 33, 1, "", "exceeds the address length"},
		{"1.2.3.0/24", 28, 0, "", "node ID 0"},
		{"1.0.0.0/8", 32, 1 << 24, "1.0.0.0/32", ""},
		{"10.0.0.0/8", 40, 1, "", "exceeds"},
		{"::/0", 128, 1<<32 - 1, "::ffff:ffff/128", ""}, // more subnets than IDs: no wrap
		{"::/0", 32, 1<<32 - 1, "ffff:ffff::/32", ""},
		{"fd00::/96", 128, 1<<32 - 1, "fd00::ffff:ffff/128", ""},
	}
	for _, c := range cases {
		got, err := Dissect(mustPrefix(c.cluster), c.oneNode, c.id)
		if c.err != "" {
			g.Expect(err).To(MatchError(ContainSubstring(c.err)), "%+v", c)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "%+v", c)
		g.Expect(got.String()).To(Equal(c.want), "%+v", c)
	}
}

// The static default gateway is stepped over (TestExcludeGateway) and never
// pushes a node out of the subnet (bug 3 of spec §2.16: the original
// returned 3.4.5.8, outside 3.4.5.0/29, for the top node).
func TestNodeAddressStepsOverGatewayInsideTheSubnet(t *testing.T) {
	g := NewWithT(t)
	sub, gw := mustPrefix("3.4.5.192/26"), netip.MustParseAddr("3.4.5.194")
	var got []string
	for id := uint32(1); id <= 3; id++ {
		a, err := NodeAddress(sub, id, gw)
		g.Expect(err).NotTo(HaveOccurred())
		got = append(got, a.String())
	}
	g.Expect(got).To(Equal([]string{"3.4.5.193", "3.4.5.195", "3.4.5.196"}))

	small := mustPrefix("3.4.5.0/29")
	_, err := NodeAddress(small, 7, netip.MustParseAddr("3.4.5.1"))
	g.Expect(err).To(MatchError(ContainSubstring("outside 3.4.5.0/29")))
	g.Expect(errors.Is(err, ErrNodeIDRange)).To(BeTrue())

	// A gateway outside the subnet shifts nothing (the original compared
	// bytes and shifted every node above it).
	a, err := NodeAddress(sub, 1, netip.MustParseAddr("1.1.1.1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.String()).To(Equal("3.4.5.193"))

	// A subnet with 64 host bits or more has room for every node ID.
	a, err = NodeAddress(mustPrefix("fd00:1::/64"), 1<<32-1, netip.MustParseAddr("fd00:1::1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.String()).To(Equal("fd00:1::1:0:0"))
}

func TestNodeIDOf(t *testing.T) {
	g := NewWithT(t)
	id, err := NodeIDOf(mustPrefix("1.2.128.0/17"), 29, netip.MustParseAddr("1.2.128.40"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(uint32(5)))
	id, err = NodeIDOf(mustPrefix("fe10:f00d::/90"), 120, netip.MustParseAddr("fe10:f00d::500"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(uint32(5)))
	_, err = NodeIDOf(mustPrefix("1.2.128.0/17"), 29, netip.MustParseAddr("9.9.9.9"))
	g.Expect(err).To(MatchError("pod IP 9.9.9.9 not from pod subnet 1.2.128.0/17"))
	_, err = NodeIDOf(mustPrefix("fe10::/16"), 128, netip.MustParseAddr("fe10::1:0:0:0:0"))
	g.Expect(err).To(MatchError(ErrNodeIDRange))
	_, err = NodeIDOf(mustPrefix("10.0.0.0/8"), 32, netip.MustParseAddr("10.255.255.255"))
	g.Expect(err).NotTo(HaveOccurred(), "2^24-1 fits a node ID")
	_, err = NodeIDOf(mustPrefix("fd00::/64"), 112, netip.MustParseAddr("fd00::1:0:0:0"))
	g.Expect(err).To(MatchError(ErrNodeIDRange), "subnet 2^32 is beyond the node IDs")
}

func TestConversions(t *testing.T) {
	g := NewWithT(t)
	_, n4, _ := net.ParseCIDR("10.1.2.3/16")
	p, ok := ToPrefix(n4)
	g.Expect(ok).To(BeTrue())
	g.Expect(p.String()).To(Equal("10.1.0.0/16"))
	g.Expect(ToIPNet(p).String()).To(Equal("10.1.0.0/16"))
	g.Expect(ToIPNet(p).IP).To(HaveLen(4))
	mapped := &net.IPNet{IP: net.ParseIP("10.1.0.0"), Mask: net.CIDRMask(16, 32)}
	p, ok = ToPrefix(mapped)
	g.Expect(ok).To(BeTrue())
	g.Expect(p.Addr().Is4()).To(BeTrue())
	_, ok = ToPrefix(&net.IPNet{IP: net.ParseIP("fe10::"), Mask: net.CIDRMask(16, 32)})
	g.Expect(ok).To(BeFalse())
	_, ok = ToPrefix(nil)
	g.Expect(ok).To(BeFalse())
	a, ok := ToAddr(net.ParseIP("1.2.3.4"))
	g.Expect(ok).To(BeTrue())
	g.Expect(a.Is4()).To(BeTrue())
	_, ok = ToAddr(net.IP{1, 2})
	g.Expect(ok).To(BeFalse())
	g.Expect(ToIP(netip.Addr{})).To(BeNil())
	g.Expect(ToIPNet(netip.Prefix{})).To(BeNil())
}
