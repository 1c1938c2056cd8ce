package contivconf

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

// TestValidator is the original's contivCIDR table (spec §2.12).
func TestValidator(t *testing.T) {
	cases := []struct {
		name                 string
		contiv, node         string
		dhcp                 bool
		pod, host, ni, vxlan string
		oneNodeLen           int
		wantErr              string
	}{
		{name: "10.128.0.0/14", contiv: "10.128.0.0/14",
			pod: "10.128.0.0/16", host: "10.129.0.0/16", ni: "10.130.0.0/23", vxlan: "10.130.2.0/23", oneNodeLen: 25},
		{name: "192.240.0.0/12", contiv: "192.240.0.0/12",
			pod: "192.240.0.0/16", host: "192.241.0.0/16", ni: "192.242.0.0/23", vxlan: "192.242.2.0/23", oneNodeLen: 25},
		{name: "configured node interconnect is kept", contiv: "10.128.0.0/14", node: "192.168.16.0/24",
			pod: "10.128.0.0/16", host: "10.129.0.0/16", ni: "192.168.16.0/24", vxlan: "10.130.2.0/23", oneNodeLen: 25},
		{name: "configured node interconnect beats DHCP", contiv: "10.128.0.0/14", node: "192.168.16.0/24", dhcp: true,
			pod: "10.128.0.0/16", host: "10.129.0.0/16", ni: "192.168.16.0/24", vxlan: "10.130.2.0/23", oneNodeLen: 25},
		{name: "DHCP: no node interconnect", contiv: "10.128.0.0/14", dhcp: true,
			pod: "10.128.0.0/16", host: "10.129.0.0/16", ni: "", vxlan: "10.130.2.0/23", oneNodeLen: 25},
		{name: "fe10::/64", contiv: "fe10::/64",
			pod: "fe10::/112", host: "fe10::1:0/112", ni: "fe10::2:0/119", vxlan: "fe10::2:200/119", oneNodeLen: 121},
		{name: "exactly 18 host bits", contiv: "10.128.0.0/14",
			pod: "10.128.0.0/16", host: "10.129.0.0/16", ni: "10.130.0.0/23", vxlan: "10.130.2.0/23", oneNodeLen: 25},
		{name: "::/0", contiv: "::/0",
			pod: "::/112", host: "::1:0/112", ni: "::2:0/119", vxlan: "::2:200/119", oneNodeLen: 121},
		{name: "0.0.0.0/0", contiv: "0.0.0.0/0",
			pod: "0.0.0.0/16", host: "0.1.0.0/16", ni: "0.2.0.0/23", vxlan: "0.2.2.0/23", oneNodeLen: 25},
		{name: "10.130.0.0/18 is too small", contiv: "10.130.0.0/18",
			wantErr: "ContivCIDR is not valid, network must provide at least 18bit space (10.130.0.0/18 has 14)"},
		{name: "fe10::/120 is too small", contiv: "fe10::/120",
			wantErr: "ContivCIDR is not valid, network must provide at least 18bit space (fe10::/120 has 8)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var node netip.Prefix
			if tc.node != "" {
				node = netip.MustParsePrefix(tc.node)
			}
			s, err := splitContivCIDR(netip.MustParsePrefix(tc.contiv), node, tc.dhcp)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.pod.String()).To(Equal(tc.pod))
			g.Expect(s.vppHost.String()).To(Equal(tc.host))
			g.Expect(s.vxlan.String()).To(Equal(tc.vxlan))
			if tc.ni == "" {
				g.Expect(s.nodeInterconnect.IsValid()).To(BeFalse())
			} else {
				g.Expect(s.nodeInterconnect.String()).To(Equal(tc.ni))
			}
			g.Expect(s.podOneNodeLen).To(Equal(tc.oneNodeLen))
			g.Expect(s.vppHostOneNodeLen).To(Equal(tc.oneNodeLen))
		})
	}
}

// The same table through Parse: the effective IPAMConfig carries the split.
func TestContivCIDRThroughParse(t *testing.T) {
	cases := []struct {
		name, yaml           string
		pod, host, ni, vxlan string
		oneNodeLen           int
	}{
		{"IPv4", "ipamConfig: {contivCIDR: 10.128.0.0/14}", "10.128.0.0/16", "10.129.0.0/16", "10.130.0.0/23", "10.130.2.0/23", 25},
		{"host bits", "ipamConfig: {contivCIDR: 192.241.2.3/12}", "192.240.0.0/16", "192.241.0.0/16", "192.242.0.0/23", "192.242.2.0/23", 25},
		{"configured", "ipamConfig: {contivCIDR: 10.128.0.0/14, nodeInterconnectCIDR: 192.168.16.0/24}",
			"10.128.0.0/16", "10.129.0.0/16", "192.168.16.0/24", "10.130.2.0/23", 25},
		{"DHCP", "ipamConfig: {contivCIDR: 10.128.0.0/14, nodeInterconnectDHCP: true}", "10.128.0.0/16", "10.129.0.0/16", "", "10.130.2.0/23", 25},
		{"IPv6", "ipamConfig: {contivCIDR: 'fe10::/64', serviceCIDR: 'fd00::/108'}", "fe10::/112", "fe10::1:0/112", "fe10::2:0/119", "fe10::2:200/119", 121},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := parseYAML(t, tc.yaml)
			g.Expect(err).NotTo(HaveOccurred())
			ipam := p.IPAM
			g.Expect(ipam.PodSubnetCIDR.String()).To(Equal(tc.pod))
			g.Expect(ipam.VPPHostSubnetCIDR.String()).To(Equal(tc.host))
			if tc.ni == "" {
				g.Expect(ipam.NodeInterconnectCIDR.IsValid()).To(BeFalse())
			} else {
				g.Expect(ipam.NodeInterconnectCIDR.String()).To(Equal(tc.ni))
			}
			g.Expect(ipam.VxlanCIDR.String()).To(Equal(tc.vxlan))
			g.Expect(int(ipam.PodSubnetOneNodePrefixLen)).To(Equal(tc.oneNodeLen))
			g.Expect(int(ipam.VPPHostSubnetOneNodePrefixLen)).To(Equal(tc.oneNodeLen))
			g.Expect(ipam.ContivCIDR.IsValid()).To(BeTrue())
		})
	}
}
