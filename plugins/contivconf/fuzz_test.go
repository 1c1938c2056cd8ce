package contivconf

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
)

// FuzzParse feeds arbitrary bytes through the YAML decode and the
// validation. Nothing may panic, and an accepted config's effective subnets
// must be valid, of one family and disjoint, with usable one-node prefixes.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("contiv.conf"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"ipamConfig: {contivCIDR: 10.128.0.0/14}",
		"ipamConfig: {contivCIDR: 'fe10::/64', serviceCIDR: 'fd00::/108'}",
		"ipamConfig: {contivCIDR: 10.128.0.0/14, nodeInterconnectCIDR: 192.168.16.0/24}",
		"ipamConfig: {contivCIDR: 10.128.0.0/14, nodeInterconnectDHCP: true}",
		"ipamConfig: {podSubnetCIDR: 1.2.3.4/19, podSubnetOneNodePrefixLen: 18}",
		"ipamConfig: {podSubnetCIDR: 'fe10:f00d::/90', podSubnetOneNodePrefixLen: 120, nodeInterconnectCIDR: 'fe10:f00d::/90'}",
		"ipamConfig: {podSubnetCIDR: 2001::/48, podSubnetOneNodePrefixLen: 60, vppHostSubnetCIDR: 'fe30::/90', " +
			"vppHostSubnetOneNodePrefixLen: 126, vxlanCIDR: 'fe20::/120', serviceCIDR: 'fd00::/112', defaultGateway: 'fe10::1'}",
		"nodeConfig: [{nodeName: node, gateway: 3.4.5.194, mainVPPInterface: {interfaceName: e, ip: 3.4.5.1/26, useDHCP: true}}]",
		"STNVersion: 2\ninterfaceRxMode: polling\n",
		"ipamConfig: {srv6: {sfcIDLengthUsedInSidForServiceFunction: 112}}",
		"ipamConfig: {dualStack: {serviceCIDR: 'fd00:96::/112', podSubnetCIDR: 'fd00:10:1::/48', podSubnetOneNodePrefixLen: 64, " +
			"vppHostSubnetCIDR: 'fd00:30::/48', vppHostSubnetOneNodePrefixLen: 64, nodeInterconnectCIDR: 'fd00:16::/64', " +
			"vxlanCIDR: 'fd00:17::/64'}, excludeIPs: [{cidr: 10.1.5.7, owner: gw}, {cidr: 'fd00:10:1:5::40/124'}], reserveLocalRoutes: true}",
		"ipamConfig: {contivCIDR: 'fe10::/64', serviceCIDR: 'fd00::/112', nodeInterconnectDHCP: true, " +
			"dualStack: {contivCIDR: 10.128.0.0/14, serviceCIDR: 10.96.0.0/12}}",
		"ipamConfig: {dualStack: {contivCIDR: 10.128.0.0/14, serviceCIDR: 10.96.0.0/12}}",
		"ipamConfig: {dualStack: {}, excludeIPs: [{cidr: 10.1.5.7/24}, {cidr: ''}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeConfig(data, "fuzz.conf")
		if err != nil {
			return
		}
		p, err := Parse(&c)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		checkEffective(t, &p.IPAM)
		for i := range c.NodeConfig {
			checkGateway(t, "node gateway", staticDefaultGW(&p.IPAM, &c.NodeConfig[i]), p.IPAM.UseIPv6)
		}
		checkGateway(t, "static default gateway", staticDefaultGW(&p.IPAM, nil), p.IPAM.UseIPv6)
	})
}

// checkEffective asserts the invariants of an accepted IPAM config: every
// family's (checkFamily), two families of different address families, and
// masked exclusions with an owner.
func checkEffective(t *testing.T, c *IPAMConfig) {
	t.Helper()
	fams := c.Families()
	for i := range fams {
		checkFamily(t, fmt.Sprintf("family %d: ", i), &fams[i])
	}
	if len(fams) == 2 && fams[0].UseIPv6 == fams[1].UseIPv6 {
		t.Fatalf("both families have UseIPv6 %v", fams[0].UseIPv6)
	}
	for i, e := range c.Exclusions {
		if !e.Prefix.IsValid() || e.Prefix != e.Prefix.Masked() || e.Prefix.Addr().Is4In6() || e.Owner == "" {
			t.Fatalf("exclusion %d %v (owner %q): invalid, not masked, IPv4-mapped or without owner", i, e.Prefix, e.Owner)
		}
	}
	checkGateway(t, "default gateway", c.DefaultGateway, c.UseIPv6)
}

// checkFamily asserts the invariants of one accepted family: its subnets
// are valid, masked, of its family and disjoint, with usable one-node
// prefixes.
func checkFamily(t *testing.T, what string, c *FamilyConfig) {
	t.Helper()
	named := map[string]netip.Prefix{
		"pod": c.PodSubnetCIDR, "vppHost": c.VPPHostSubnetCIDR, "vxlan": c.VxlanCIDR, "service": c.ServiceCIDR,
	}
	if c.NodeInterconnectCIDR.IsValid() {
		named["nodeInterconnect"] = c.NodeInterconnectCIDR
	}
	if c.ContivCIDR.IsValid() {
		named["contiv"] = c.ContivCIDR // overlaps the others: checked apart
	}
	for name, p := range named {
		if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() {
			t.Fatalf("%s%s subnet %v: invalid, not masked or IPv4-mapped", what, name, p)
		}
		if p.Addr().Is6() != c.UseIPv6 {
			t.Fatalf("%s%s subnet %v: family differs from UseIPv6 %v", what, name, p, c.UseIPv6)
		}
	}
	delete(named, "contiv")
	for an, a := range named {
		for bn, b := range named {
			if an < bn && a.Overlaps(b) {
				t.Fatalf("%s%s %v overlaps %s %v", what, an, a, bn, b)
			}
		}
	}
	// The room IPAM needs (plugins/ipam/acceptedconfig_test.go initialises
	// IPAM with accepted configs): a node's pod subnet 8 addresses, its
	// VPP-host subnet 4, node ID 1 in node-interconnect (past a gateway) 4
	// and in vxlan 2.
	for _, x := range []struct {
		name     string
		p        netip.Prefix
		l        int
		hostBits int
	}{
		{"pod", c.PodSubnetCIDR, c.PodSubnetOneNodePrefixLen, 3},
		{"vppHost", c.VPPHostSubnetCIDR, c.VPPHostSubnetOneNodePrefixLen, 2},
		{"nodeInterconnect", c.NodeInterconnectCIDR, c.NodeInterconnectCIDR.Bits(), 2},
		{"vxlan", c.VxlanCIDR, c.VxlanCIDR.Bits(), 1},
	} {
		if !x.p.IsValid() && x.name == "nodeInterconnect" {
			continue
		}
		if x.l < x.p.Bits() || x.l > x.p.Addr().BitLen()-x.hostBits {
			t.Fatalf("%s%s: prefix length %d for %v leaves fewer than 2^%d addresses", what, x.name, x.l, x.p, x.hostBits)
		}
	}
	if c.PodSubnetOneNodePrefixLen <= c.PodSubnetCIDR.Bits() || c.VPPHostSubnetOneNodePrefixLen <= c.VPPHostSubnetCIDR.Bits() {
		t.Fatalf("%sone-node prefix lengths %d, %d not longer than %v, %v", what, c.PodSubnetOneNodePrefixLen,
			c.VPPHostSubnetOneNodePrefixLen, c.PodSubnetCIDR, c.VPPHostSubnetCIDR)
	}
}

// checkGateway asserts that an accepted gateway is none or a unicast
// address of the subnets' family.
func checkGateway(t *testing.T, what string, gw netip.Addr, ipv6 bool) {
	t.Helper()
	if !gw.IsValid() {
		return
	}
	if gw.Is6() != ipv6 || gw.Is4In6() || gw.Zone() != "" || !(gw.IsGlobalUnicast() || gw.IsLinkLocalUnicast()) {
		t.Fatalf("%s %v accepted with UseIPv6 %v", what, gw, ipv6)
	}
}

// FuzzParseIPAM drives the ipamConfig keys directly (the byte-level
// FuzzParse rarely produces a config that is accepted).
func FuzzParseIPAM(f *testing.F) {
	f.Add("", "10.96.0.0/12", "10.1.0.0/16", 24, "172.30.0.0/16", 24, "", "192.168.30.0/24", "", false)
	f.Add("10.128.0.0/14", "10.96.0.0/12", "", 0, "", 0, "", "", "", false)
	f.Add("fe10::/64", "fd00::/108", "", 0, "", 0, "", "", "", true)
	f.Add("", "fd00::/112", "2001::/48", 60, "fe30::/90", 126, "fe10::/90", "fe20::/120", "fe10::1", false)
	f.Add("", "10.96.0.0/12", "1.2.128.0/17", 29, "2.3.192.0/18", 30, "3.4.5.192/26", "4.5.6.192/26", "3.4.5.194", false)
	f.Fuzz(func(t *testing.T, contiv, service, pod string, podLen int, host string, hostLen int, node, vxlan, gw string, dhcp bool) {
		c := DefaultConfig()
		ic := &c.IPAMConfig
		ic.ContivCIDR, ic.ServiceCIDR, ic.PodSubnetCIDR, ic.PodSubnetOneNodePrefixLen = contiv, service, pod, podLen
		ic.VPPHostSubnetCIDR, ic.VPPHostSubnetOneNodePrefixLen, ic.NodeInterconnectCIDR = host, hostLen, node
		ic.VxlanCIDR, ic.DefaultGateway, ic.NodeInterconnectDHCP = vxlan, gw, dhcp
		p, err := Parse(&c)
		if err != nil {
			return
		}
		checkEffective(t, &p.IPAM)
		if contiv == "" && (p.IPAM.PodSubnetOneNodePrefixLen != podLen || p.IPAM.VPPHostSubnetOneNodePrefixLen != hostLen) {
			t.Fatalf("one-node prefix lengths %d, %d, want %d, %d", p.IPAM.PodSubnetOneNodePrefixLen,
				p.IPAM.VPPHostSubnetOneNodePrefixLen, podLen, hostLen)
		}
	})
}

// FuzzParseDualStack drives the dualStack keys and one exclusion directly
// over the IPv4 defaults.
func FuzzParseDualStack(f *testing.F) {
	f.Add("", "fd00:96::/112", "fd00:10:1::/48", 64, "fd00:30::/48", 64, "fd00:16::/64", "fd00:17::/64", "10.1.5.7")
	f.Add("fe10::/64", "fd00::/112", "", 0, "", 0, "", "", "fd00:10:1:5::40/124")
	f.Add("", "10.200.0.0/16", "10.2.0.0/16", 24, "172.31.0.0/16", 24, "", "192.168.31.0/24", "10.1.5.7/24")
	f.Add("", "", "", 0, "", 0, "", "", "")
	f.Fuzz(func(t *testing.T, contiv, service, pod string, podLen int, host string, hostLen int, node, vxlan, excl string) {
		c := DefaultConfig()
		c.IPAMConfig.DualStack = &FamilyJSON{ContivCIDR: contiv, ServiceCIDR: service, PodSubnetCIDR: pod,
			PodSubnetOneNodePrefixLen: podLen, VPPHostSubnetCIDR: host, VPPHostSubnetOneNodePrefixLen: hostLen,
			NodeInterconnectCIDR: node, VxlanCIDR: vxlan}
		c.IPAMConfig.ExcludeIPs = []ExclusionJSON{{CIDR: excl}}
		p, err := Parse(&c)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		checkEffective(t, &p.IPAM)
		if p.IPAM.Second == nil || len(p.IPAM.Exclusions) != 1 {
			t.Fatalf("accepted without its second family or exclusion: %+v", p.IPAM)
		}
	})
}
