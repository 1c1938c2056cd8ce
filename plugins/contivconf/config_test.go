package contivconf

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSampleConfigIsTheDefaults(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("contiv.conf")
	g.Expect(err).NotTo(HaveOccurred())
	c, err := DecodeConfig(data, "contiv.conf")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.NodeConfig).To(BeEmpty())
	c.NodeConfig = nil
	g.Expect(c).To(Equal(DefaultConfig()))
	g.Expect(c.Validate()).To(Succeed())
}

// Every key of Config (json tags, recursively) appears in the sample, as a
// key or, for the nodeConfig items, in the commented example.
func TestSampleListsEveryKey(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("contiv.conf")
	g.Expect(err).NotTo(HaveOccurred())
	sample := string(data)
	full := DefaultConfig()
	full.NodeConfig = []NodeConfig{{OtherVPPInterfaces: []InterfaceConfig{{}}}}
	full.IPAMConfig.DualStack = &FamilyJSON{}
	full.IPAMConfig.ExcludeIPs = []ExclusionJSON{{}}
	for _, key := range jsonKeys(t, full) {
		g.Expect(sample).To(ContainSubstring(key+":"), "key %s", key)
	}
}

// jsonKeys lists the leaf and block keys of v marshalled without omitempty
// effects (every key is set to a non-zero value first by the caller's value
// or appears anyway for structs).
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			for k, v := range t {
				keys = append(keys, k)
				walk(v)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(m)
	// Keys omitted because their default is zero.
	keys = append(keys, "mtuSize", "tapv2RxRingSize", "tapv2TxRingSize", "vmxnet3RxRingSize",
		"vmxnet3TxRingSize", "interfaceRxMode", "enableGSO", "mainVRFID", "useSRv6ForServices",
		"useSRv6ForServiceFunctionChaining", "useDX6ForSrv6NodetoNodeTransport", "routeServiceCIDRToVPP",
		"stealFirstNIC", "stealInterface", "stnVersion", "enablePacketTrace", "useExternalIPAM",
		"contivCIDR", "nodeInterconnectDHCP", "nodeInterconnectCIDR", "defaultGateway",
		"nodeName", "ip", "useDHCP", "gateway", "natExternalTraffic", "reserveLocalRoutes", "owner",
		"serviceCIDR", "podSubnetCIDR", "podSubnetOneNodePrefixLen", "vppHostSubnetCIDR", "vppHostSubnetOneNodePrefixLen",
		"vxlanCIDR")
	return keys
}

func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	c, err := DecodeConfig(nil, "empty")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c).To(Equal(DefaultConfig()))
	p, err := Parse(&c)
	g.Expect(err).NotTo(HaveOccurred())
	ipam := p.IPAM
	g.Expect(ipam.UseIPv6).To(BeFalse())
	g.Expect(ipam.UseExternalIPAM).To(BeFalse())
	g.Expect(ipam.ContivCIDR.IsValid()).To(BeFalse())
	g.Expect(ipam.ServiceCIDR.String()).To(Equal("10.96.0.0/12"))
	g.Expect(ipam.PodSubnetCIDR.String()).To(Equal("10.1.0.0/16"))
	g.Expect(ipam.PodSubnetCIDR.Addr().Is4()).To(BeTrue(), "IPv4, not IPv4-mapped")
	g.Expect(ipam.PodSubnetOneNodePrefixLen).To(BeEquivalentTo(24))
	g.Expect(ipam.VPPHostSubnetCIDR.String()).To(Equal("172.30.0.0/16"))
	g.Expect(ipam.VPPHostSubnetOneNodePrefixLen).To(BeEquivalentTo(24))
	g.Expect(ipam.NodeInterconnectCIDR.IsValid()).To(BeFalse(), "no code default")
	g.Expect(ipam.VxlanCIDR.String()).To(Equal("192.168.30.0/24"))
	g.Expect(ipam.DefaultGateway.IsValid()).To(BeFalse())
	g.Expect(p.SRv6.ServicePolicyBSIDSubnetCIDR.String()).To(Equal("8fff::/16"))
	g.Expect(p.SRv6.SFCEndLocalSIDSubnetCIDR.String()).To(Equal("9310::/16"))
	g.Expect(p.SRv6.SFCIDLengthUsedInSidForServiceFunction).To(BeEquivalentTo(16))

	g.Expect(c.UseTAPInterfaces).To(BeTrue())
	g.Expect(c.TAPInterfaceVersion).To(Equal(2))
	g.Expect(c.TCPChecksumOffloadDisabled).To(BeTrue())
	g.Expect(c.PodVRFID).To(BeEquivalentTo(1))
	g.Expect(c.NodeToNodeTransport).To(Equal("vxlan"))
	g.Expect(c.ScanIPNeighbors).To(BeTrue())
	g.Expect(c.IPNeighborScanInterval).To(Equal(1))
	g.Expect(c.IPNeighborStaleThreshold).To(Equal(4))
	g.Expect(c.STNSocketFile).To(Equal("/var/run/contiv/stn.sock"))
	g.Expect(c.NatExternalTraffic).To(BeTrue())
	g.Expect(c.CRDNodeConfigurationDisabled).To(BeTrue())
}

func TestDecodeKeepsDefaultsAndOverrides(t *testing.T) {
	g := NewWithT(t)
	c, err := DecodeConfig([]byte("ipamConfig:\n  podSubnetCIDR: 10.5.0.0/16\n  srv6:\n    sfcEndLocalSIDSubnetCIDR: 9311::/16\n"), "t")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.IPAMConfig.PodSubnetCIDR).To(Equal("10.5.0.0/16"))
	g.Expect(c.IPAMConfig.ServiceCIDR).To(Equal(DefaultServiceCIDR), "missing keys keep their default")
	g.Expect(c.IPAMConfig.SRv6.SFCEndLocalSIDSubnetCIDR).To(Equal("9311::/16"))
	g.Expect(c.IPAMConfig.SRv6.SFCPolicyBSIDSubnetCIDR).To(Equal("8eee::/16"))

	c, err = DecodeConfig([]byte("useTAPInterfaces: false\nipamConfig:\n  podSubnetOneNodePrefixLen: 0\n"), "t")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.UseTAPInterfaces).To(BeFalse(), "a key present with a zero value overrides")
	g.Expect(c.IPAMConfig.PodSubnetOneNodePrefixLen).To(Equal(0))
}

func TestUnknownKeyIsAnErrorNamingKeyAndFile(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"mtuSise: 1500\n", `unknown key "mtuSise"`},
		{"ipamConfig:\n  podSubnetCIRD: 10.1.0.0/16\n", `unknown key "ipamConfig.podSubnetCIRD"`},
		{"ipamConfig:\n  srv6:\n    foo: 9000::/16\n", `unknown key "ipamConfig.srv6.foo"`},
		{"ipamConfig:\n  dualStack:\n    podSubnetCIRD: fd00::/48\n", `unknown key "ipamConfig.dualStack.podSubnetCIRD"`},
		{"ipamConfig:\n  dualStack:\n    defaultGateway: fd00::1\n", `unknown key "ipamConfig.dualStack.defaultGateway"`},
		{"ipamConfig:\n  excludeIPs:\n    - cidr: 10.1.5.7\n      ownr: me\n", `unknown key "ipamConfig.excludeIPs[0].ownr"`},
		{"ipamConfig:\n  excludeIPs: [10.1.5.7]\n", `ipamConfig.excludeIPs[0]`},
		{"ipamConfig:\n  dualStack: fd00::/48\n", `ipamConfig.dualStack`},
		{"nodeConfig:\n  - nodeName: a\n    gw: 1.2.3.4\n", `unknown key "nodeConfig[0].gw"`},
		{"nodeConfig:\n  - nodeName: a\n    mainVPPInterface: {name: eth0}\n", `unknown key "nodeConfig[0].mainVPPInterface.name"`},
		{"mtuSize: big\n", `"mtuSize"`},
		{"ipamConfig:\n  podSubnetOneNodePrefixLen: 24.5\n", `podSubnetOneNodePrefixLen`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			g := NewWithT(t)
			_, err := DecodeConfig([]byte(tc.yaml), "/etc/contiv/contiv.conf")
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(err).To(MatchError(ContainSubstring("/etc/contiv/contiv.conf")))
		})
	}
}

func TestKeysMatchCaseInsensitively(t *testing.T) {
	g := NewWithT(t)
	c, err := DecodeConfig([]byte("STNVersion: 2\nMTUSize: 1450\nIPAMConfig:\n  PodSubnetCIDR: 10.9.0.0/16\n"+
		"  VPPHostSubnetOneNodePrefixLen: 25\nnodeconfig:\n  - NodeName: n1\n    MainVppInterface: {InterfaceName: eth0, UseDhcp: true}\n"), "t")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.STNVersion).To(Equal(2))
	g.Expect(c.MTUSize).To(BeEquivalentTo(1450))
	g.Expect(c.IPAMConfig.PodSubnetCIDR).To(Equal("10.9.0.0/16"))
	g.Expect(c.IPAMConfig.VPPHostSubnetOneNodePrefixLen).To(Equal(25))
	g.Expect(c.NodeConfig).To(HaveLen(1))
	g.Expect(c.NodeConfig[0].MainVPPInterface).To(Equal(InterfaceConfig{InterfaceName: "eth0", UseDHCP: true}))
	g.Expect(c.Validate()).To(Succeed())

	_, err = DecodeConfig([]byte("stnVersion: 1\nSTNVersion: 2\n"), "t")
	g.Expect(err).To(MatchError(ContainSubstring("STNVersion")), "the same key twice in different case is refused")
}

// parseYAML decodes over the defaults and parses.
func parseYAML(t *testing.T, y string) (*Parsed, error) {
	t.Helper()
	c, err := DecodeConfig([]byte(y), "test.conf")
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return Parse(&c)
}

func TestValidationErrorsNameKeyAndValue(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		// TestConfigWithBadCIDR of the original, each key separately.
		{"bad pod CIDR", "ipamConfig: {podSubnetCIDR: 1.2.3./19}", []string{`ipamConfig.podSubnetCIDR "1.2.3./19": invalid CIDR`}},
		{"bad vpp-host CIDR", "ipamConfig: {vppHostSubnetCIDR: 1.2.3./19}", []string{`ipamConfig.vppHostSubnetCIDR "1.2.3./19": invalid CIDR`}},
		{"bad node CIDR", "ipamConfig: {nodeInterconnectCIDR: 1.2.3./19}", []string{`ipamConfig.nodeInterconnectCIDR "1.2.3./19": invalid CIDR`}},
		{"bad vxlan CIDR", "ipamConfig: {vxlanCIDR: 10.0.0.0/33}", []string{`ipamConfig.vxlanCIDR "10.0.0.0/33": invalid CIDR`}},
		{"bad service CIDR", "ipamConfig: {serviceCIDR: nope}", []string{`ipamConfig.serviceCIDR "nope": invalid CIDR`}},
		{"empty service CIDR", `ipamConfig: {serviceCIDR: ""}`, []string{`ipamConfig.serviceCIDR "": invalid CIDR`}},
		{"empty pod CIDR", `ipamConfig: {podSubnetCIDR: ""}`, []string{`ipamConfig.podSubnetCIDR "": invalid CIDR`}},
		{"bad contivCIDR", "ipamConfig: {contivCIDR: 10.0.0/8}", []string{`ipamConfig.contivCIDR "10.0.0/8": invalid CIDR`}},
		{"address without length", "ipamConfig: {podSubnetCIDR: 10.1.0.0}", []string{`ipamConfig.podSubnetCIDR "10.1.0.0": invalid CIDR`}},
		{"IPv4-mapped", `ipamConfig: {podSubnetCIDR: "::ffff:10.1.0.0/112"}`, []string{`ipamConfig.podSubnetCIDR "::ffff:10.1.0.0/112": IPv4-mapped`}},
		{"bad srv6 CIDR", "ipamConfig: {srv6: {servicePodLocalSIDSubnetCIDR: 9300::/129}}",
			[]string{`ipamConfig.srv6.servicePodLocalSIDSubnetCIDR "9300::/129": invalid CIDR`}},
		{"IPv4 srv6 CIDR", "ipamConfig: {srv6: {sfcEndLocalSIDSubnetCIDR: 10.0.0.0/8}}",
			[]string{`ipamConfig.srv6.sfcEndLocalSIDSubnetCIDR "10.0.0.0/8": must be IPv6`}},
		{"sfc ID length", "ipamConfig: {srv6: {sfcIDLengthUsedInSidForServiceFunction: 120}}",
			[]string{`ipamConfig.srv6.sfcIDLengthUsedInSidForServiceFunction 120: want 0..112`}},
		{"bad default gateway", "ipamConfig: {defaultGateway: 1.2.3.256}", []string{`ipamConfig.defaultGateway "1.2.3.256": invalid IP address`}},
		{"IPv4-mapped gateway", `ipamConfig: {defaultGateway: "::ffff:1.2.3.4"}`, []string{`ipamConfig.defaultGateway "::ffff:1.2.3.4": IPv4-mapped`}},
		{"gateway with zone", `ipamConfig: {defaultGateway: "fe80::1%eth0"}`, []string{`ipamConfig.defaultGateway "fe80::1%eth0": invalid IP address`}},
		// A gateway that parses but cannot be one: refused here rather than
		// silently ignored by IPAM.
		{"IPv6 gateway, IPv4 subnets", `ipamConfig: {defaultGateway: "fe80::1"}`,
			[]string{`ipamConfig.defaultGateway "fe80::1": is IPv6 but ipamConfig.podSubnetCIDR "10.1.0.0/16" is IPv4`}},
		{"IPv4 gateway, IPv6 subnets", "ipamConfig: {podSubnetCIDR: 2001::/48, podSubnetOneNodePrefixLen: 60, vppHostSubnetCIDR: fe30:f00d::/90, " +
			"vppHostSubnetOneNodePrefixLen: 126, vxlanCIDR: fe20:f00d::/120, serviceCIDR: fd00::/112, defaultGateway: 192.168.16.1}",
			[]string{`ipamConfig.defaultGateway "192.168.16.1": is IPv4 but ipamConfig.podSubnetCIDR "2001::/48" is IPv6`}},
		{"IPv4 gateway, IPv6 contivCIDR", "ipamConfig: {contivCIDR: fe10::/64, serviceCIDR: fd00::/112, defaultGateway: 10.0.0.1}",
			[]string{`ipamConfig.defaultGateway "10.0.0.1": is IPv4 but ipamConfig.contivCIDR "fe10::/64" is IPv6`}},
		{"unspecified gateway", "ipamConfig: {defaultGateway: 0.0.0.0}",
			[]string{`ipamConfig.defaultGateway "0.0.0.0": not a unicast host address`}},
		{"unspecified IPv6 gateway", "ipamConfig: {contivCIDR: fe10::/64, serviceCIDR: fd00::/112, defaultGateway: '::'}",
			[]string{`ipamConfig.defaultGateway "::": not a unicast host address`}},
		{"broadcast gateway", "ipamConfig: {defaultGateway: 255.255.255.255}",
			[]string{`ipamConfig.defaultGateway "255.255.255.255": not a unicast host address`}},
		{"multicast gateway", "ipamConfig: {defaultGateway: 224.0.0.1}",
			[]string{`ipamConfig.defaultGateway "224.0.0.1": not a unicast host address`}},
		{"loopback gateway", "ipamConfig: {defaultGateway: 127.0.0.1}",
			[]string{`ipamConfig.defaultGateway "127.0.0.1": not a unicast host address`}},
		// TestConfigWithBadPrefixSizes of the original.
		{"pod one-node not longer", "ipamConfig: {podSubnetCIDR: 1.2.3.4/19, podSubnetOneNodePrefixLen: 18}",
			[]string{`ipamConfig.podSubnetOneNodePrefixLen 18: must be longer than the prefix length 19 of ipamConfig.podSubnetCIDR "1.2.3.4/19"`}},
		{"host one-node not longer", "ipamConfig: {vppHostSubnetCIDR: 1.2.3.4/19, vppHostSubnetOneNodePrefixLen: 18}",
			[]string{`ipamConfig.vppHostSubnetOneNodePrefixLen 18: must be longer than the prefix length 19 of ipamConfig.vppHostSubnetCIDR "1.2.3.4/19"`}},
		{"one-node equal", "ipamConfig: {podSubnetCIDR: 10.1.0.0/24, podSubnetOneNodePrefixLen: 24}",
			[]string{`ipamConfig.podSubnetOneNodePrefixLen 24: must be longer`}},
		{"one-node zero", "ipamConfig: {podSubnetOneNodePrefixLen: 0}", []string{`ipamConfig.podSubnetOneNodePrefixLen 0: must be longer`}},
		{"one-node too long", "ipamConfig: {podSubnetOneNodePrefixLen: 33}",
			[]string{`ipamConfig.podSubnetOneNodePrefixLen 33: exceeds the 32-bit address length of ipamConfig.podSubnetCIDR "10.1.0.0/16"`}},
		{"one-node 256 does not wrap", "ipamConfig: {podSubnetOneNodePrefixLen: 280}",
			[]string{`ipamConfig.podSubnetOneNodePrefixLen 280: exceeds`}},
		// Room IPAM needs: every accepted config must initialise
		// (plugins/ipam/acceptedconfig_test.go).
		{"VPP-host subnet without two host addresses", "ipamConfig: {vppHostSubnetOneNodePrefixLen: 31}",
			[]string{`ipamConfig.vppHostSubnetOneNodePrefixLen 31: leaves 2 addresses per node, too few for the network, VPP (host 1), Linux (host 2) and broadcast addresses`,
				"use at most 30"}},
		{"VPP-host subnet without two host addresses IPv6", ipv6IPAM("vppHostSubnetOneNodePrefixLen", "127"),
			[]string{`ipamConfig.vppHostSubnetOneNodePrefixLen 127: leaves 2 addresses per node`, "use at most 126"}},
		{"pod subnet without a pod address", "ipamConfig: {podSubnetOneNodePrefixLen: 30}",
			[]string{`ipamConfig.podSubnetOneNodePrefixLen 30: leaves 4 addresses per node, too few for the network, gateway, NAT loopback and broadcast addresses and at least one pod (8 addresses); use at most 29`}},
		{"pod subnet without a pod address IPv6", ipv6IPAM("podSubnetOneNodePrefixLen", "126"),
			[]string{`ipamConfig.podSubnetOneNodePrefixLen 126: leaves 4 addresses per node`, "use at most 125"}},
		{"pod subnet of 2 addresses IPv6", ipv6IPAM("podSubnetOneNodePrefixLen", "127"),
			[]string{`ipamConfig.podSubnetOneNodePrefixLen 127: leaves 2 addresses per node`, "use at most 125"}},
		{"node interconnect /31", "ipamConfig: {nodeInterconnectCIDR: 192.168.16.0/31}",
			[]string{`ipamConfig.nodeInterconnectCIDR "192.168.16.0/31": has 2 address(es), too few for node ID 1 (host 1, or host 2 when the gateway is at or below host 1; 4 addresses); use a prefix length of at most 30`}},
		{"node interconnect /32", "ipamConfig: {nodeInterconnectCIDR: 192.168.16.1/32}",
			[]string{`ipamConfig.nodeInterconnectCIDR "192.168.16.1/32": has 1 address(es)`, "at most 30"}},
		{"node interconnect /127", ipv6IPAM("nodeInterconnectCIDR", "fe50::/127"),
			[]string{`ipamConfig.nodeInterconnectCIDR "fe50::/127": has 2 address(es)`, "at most 126"}},
		{"vxlan /32", "ipamConfig: {vxlanCIDR: 192.168.30.1/32}",
			[]string{`ipamConfig.vxlanCIDR "192.168.30.1/32": has 1 address(es), too few for node ID 1 (host 1; 2 addresses); use a prefix length of at most 31`}},
		{"vxlan /128", ipv6IPAM("vxlanCIDR", "fe30::1/128"),
			[]string{`ipamConfig.vxlanCIDR "fe30::1/128": has 1 address(es)`, "at most 127"}},
		{"contivCIDR too small", "ipamConfig: {contivCIDR: 10.130.0.0/18}",
			[]string{`ipamConfig.contivCIDR "10.130.0.0/18": ContivCIDR is not valid, network must provide at least 18bit space`}},
		{"mixed families", "ipamConfig: {podSubnetCIDR: fe10::/64, podSubnetOneNodePrefixLen: 120, vppHostSubnetCIDR: fe20::/64, " +
			"vppHostSubnetOneNodePrefixLen: 120, vxlanCIDR: fe30::/120}",
			[]string{`ipamConfig.serviceCIDR "10.96.0.0/12" is IPv4 but ipamConfig.podSubnetCIDR "fe10::/64" is IPv6`}},
		{"mixed families, node", "ipamConfig: {nodeInterconnectCIDR: fe10::/64}",
			[]string{`ipamConfig.nodeInterconnectCIDR "fe10::/64" is IPv6 but ipamConfig.podSubnetCIDR "10.1.0.0/16" is IPv4`}},
		{"contivCIDR family", "ipamConfig: {contivCIDR: fe10::/64}",
			[]string{`ipamConfig.serviceCIDR "10.96.0.0/12" is IPv4 but ipamConfig.contivCIDR "fe10::/64" is IPv6`}},
		{"overlap pod/node (IPv6)", "ipamConfig: {podSubnetCIDR: fe10:f00d::/90, podSubnetOneNodePrefixLen: 120, nodeInterconnectCIDR: fe10:f00d::/90, " +
			"vppHostSubnetCIDR: fe30:f00d::/90, vppHostSubnetOneNodePrefixLen: 126, vxlanCIDR: fe20:f00d::/120, serviceCIDR: fe40::/112}",
			[]string{`ipamConfig.podSubnetCIDR "fe10:f00d::/90" overlaps ipamConfig.nodeInterconnectCIDR "fe10:f00d::/90"`}},
		{"overlap pod/service", "ipamConfig: {serviceCIDR: 10.0.0.0/8}",
			[]string{`ipamConfig.podSubnetCIDR "10.1.0.0/16" overlaps ipamConfig.serviceCIDR "10.0.0.0/8"`}},
		{"overlap host/vxlan", "ipamConfig: {vxlanCIDR: 172.30.5.0/24}",
			[]string{`ipamConfig.vppHostSubnetCIDR "172.30.0.0/16" overlaps ipamConfig.vxlanCIDR "172.30.5.0/24"`}},
		{"overlap with derived", "ipamConfig: {contivCIDR: 10.128.0.0/14, serviceCIDR: 10.129.0.0/24}",
			[]string{`ipamConfig.vppHostSubnetCIDR "10.129.0.0/16" (derived from ipamConfig.contivCIDR "10.128.0.0/14") overlaps ipamConfig.serviceCIDR "10.129.0.0/24"`}},
		{"overlap derived with configured node", "ipamConfig: {contivCIDR: 10.128.0.0/14, nodeInterconnectCIDR: 10.128.5.0/24}",
			[]string{`ipamConfig.podSubnetCIDR "10.128.0.0/16" (derived from ipamConfig.contivCIDR "10.128.0.0/14") overlaps ipamConfig.nodeInterconnectCIDR "10.128.5.0/24"`}},
		{"duplicate node", "nodeConfig: [{nodeName: a}, {nodeName: b}, {nodeName: a}]",
			[]string{`nodeConfig[2].nodeName "a": duplicate of nodeConfig[0]`}},
		{"empty node name", "nodeConfig: [{gateway: 1.1.1.1}]", []string{`nodeConfig[0].nodeName "": must not be empty`}},
		{"node gateway", "nodeConfig: [{nodeName: a, gateway: 1.2.3}]", []string{`nodeConfig[0].gateway "1.2.3": invalid IP address`}},
		{"node gateway family", "nodeConfig: [{nodeName: a, gateway: 1.1.1.1}, {nodeName: b, gateway: 'fe80::1'}]",
			[]string{`nodeConfig[1].gateway "fe80::1": is IPv6 but ipamConfig.podSubnetCIDR "10.1.0.0/16" is IPv4`}},
		{"node gateway multicast", "nodeConfig: [{nodeName: a, gateway: 'ff02::1'}]",
			[]string{`nodeConfig[0].gateway "ff02::1": not a unicast host address`}},
		{"node ip", "nodeConfig: [{nodeName: a, mainVPPInterface: {interfaceName: e, ip: 1.2.3.4/40}}]",
			[]string{`nodeConfig[0].mainVPPInterface.ip "1.2.3.4/40": invalid CIDR`}},
		{"other node ip", "nodeConfig: [{nodeName: a, otherVPPInterfaces: [{interfaceName: x, ip: 1.2.3.4/24}, {interfaceName: e2, ip: bad}]}]",
			[]string{`nodeConfig[0].otherVPPInterfaces[1].ip "bad": invalid CIDR`}},
		{"rx mode", "interfaceRxMode: fast", []string{`interfaceRxMode "fast": want one of "", "polling", "interrupt", "adaptive"`}},
		{"transport", "nodeToNodeTransport: gre", []string{`nodeToNodeTransport "gre": want one of "vxlan", "srv6", "nooverlay"`}},
		{"tap version", "tapInterfaceVersion: 3", []string{`tapInterfaceVersion 3: want 1 or 2`}},
		{"mtu", "mtuSize: 99999999999", []string{`mtuSize 99999999999: want 0..4294967295`}},
		{"ring", "tapv2RxRingSize: 70000", []string{`tapv2RxRingSize 70000: want 0..65535`}},
		{"ring2", "vmxnet3TxRingSize: -1", []string{`vmxnet3TxRingSize -1: want 0..65535`}},
		{"vrf", "podVRFID: -1", []string{`podVRFID -1: want 0..4294967295`}},
		{"scan", "ipNeighborScanInterval: 256", []string{`ipNeighborScanInterval 256: want 0..255`}},
		{"stale", "ipNeighborStaleThreshold: 300", []string{`ipNeighborStaleThreshold 300: want 0..255`}},
		{"stn", "stnVersion: 256", []string{`stnVersion 256: want 0..255`}},
		{"every error at once", "mtuSize: -1\nipamConfig: {podSubnetCIDR: 1.2.3./19, vxlanCIDR: xx, serviceCIDR: yy}\nnodeConfig: [{nodeName: a}, {nodeName: a}]",
			[]string{"mtuSize -1", `ipamConfig.podSubnetCIDR "1.2.3./19"`, `ipamConfig.vxlanCIDR "xx"`, `ipamConfig.serviceCIDR "yy"`, `nodeConfig[1].nodeName "a"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := parseYAML(t, tc.yaml)
			g.Expect(p).To(BeNil())
			for _, w := range tc.want {
				g.Expect(err).To(MatchError(ContainSubstring(w)))
			}
		})
	}
}

// ipv6IPAM is an ipamConfig block of IPv6 subnets with the keys of kv
// ("key", "value" pairs) replaced or added.
func ipv6IPAM(kv ...string) string {
	keys := []string{"podSubnetCIDR", "podSubnetOneNodePrefixLen", "vppHostSubnetCIDR", "vppHostSubnetOneNodePrefixLen",
		"vxlanCIDR", "serviceCIDR"}
	vals := map[string]string{"podSubnetCIDR": "fe10::/64", "podSubnetOneNodePrefixLen": "120", "vppHostSubnetCIDR": "fe20::/64",
		"vppHostSubnetOneNodePrefixLen": "120", "vxlanCIDR": "fe30::/120", "serviceCIDR": "fe40::/112"}
	for i := 0; i+1 < len(kv); i += 2 {
		if _, ok := vals[kv[i]]; !ok {
			keys = append(keys, kv[i])
		}
		vals[kv[i]] = kv[i+1]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %q", k, vals[k])
		if _, err := strconv.Atoi(vals[k]); err == nil {
			parts[i] = k + ": " + vals[k]
		}
	}
	return "ipamConfig: {" + strings.Join(parts, ", ") + "}"
}

func TestValidConfigs(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		check func(g *WithT, p *Parsed)
	}{
		{"the smallest subnets IPAM initialises with", "ipamConfig: {podSubnetOneNodePrefixLen: 29, vppHostSubnetOneNodePrefixLen: 30, " +
			"nodeInterconnectCIDR: 192.168.16.0/30, vxlanCIDR: 192.168.30.0/31, defaultGateway: 192.168.16.1}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.PodSubnetOneNodePrefixLen).To(BeEquivalentTo(29))
				g.Expect(p.IPAM.VxlanCIDR.String()).To(Equal("192.168.30.0/31"))
			}},
		{"the smallest subnets IPAM initialises with IPv6", ipv6IPAM("podSubnetOneNodePrefixLen", "125",
			"vppHostSubnetOneNodePrefixLen", "126", "nodeInterconnectCIDR", "fe50::/126", "vxlanCIDR", "fe30::/127"),
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.PodSubnetOneNodePrefixLen).To(BeEquivalentTo(125))
				g.Expect(p.IPAM.NodeInterconnectCIDR.String()).To(Equal("fe50::/126"))
			}},
		{"host bits mean the network (Test8bitPodIPPoolSize)", "ipamConfig: {podSubnetCIDR: 1.2.3.4/16, podSubnetOneNodePrefixLen: 24}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.PodSubnetCIDR.String()).To(Equal("1.2.0.0/16"))
			}},
		{"1.4.1.2/14 one-node /22", "ipamConfig: {podSubnetCIDR: 1.4.1.2/14, podSubnetOneNodePrefixLen: 22}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.PodSubnetCIDR.String()).To(Equal("1.4.0.0/14"))
				g.Expect(p.IPAM.PodSubnetOneNodePrefixLen).To(BeEquivalentTo(22))
			}},
		{"IPAM test fixture", "ipamConfig: {podSubnetCIDR: 1.2.128.0/17, podSubnetOneNodePrefixLen: 29, vppHostSubnetCIDR: 2.3.192.0/18, " +
			"vppHostSubnetOneNodePrefixLen: 30, nodeInterconnectCIDR: 3.4.5.192/26, vxlanCIDR: 4.5.6.192/26}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.NodeInterconnectCIDR.String()).To(Equal("3.4.5.192/26"))
				g.Expect(p.IPAM.VPPHostSubnetOneNodePrefixLen).To(BeEquivalentTo(30))
			}},
		{"IPv6 everywhere", "ipamConfig: {podSubnetCIDR: 2001::/48, podSubnetOneNodePrefixLen: 60, vppHostSubnetCIDR: fe30:f00d::/90, " +
			"vppHostSubnetOneNodePrefixLen: 126, nodeInterconnectCIDR: fe10:f00d::/90, vxlanCIDR: fe20:f00d::/120, serviceCIDR: fd00::/112, " +
			"defaultGateway: 'fe10:f00d::1'}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.UseIPv6).To(BeTrue())
				g.Expect(p.IPAM.PodSubnetCIDR.Addr().Is6()).To(BeTrue())
				g.Expect(p.IPAM.DefaultGateway.String()).To(Equal("fe10:f00d::1"))
			}},
		{"IPv4 gateway", "ipamConfig: {defaultGateway: 192.168.16.1}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.DefaultGateway).To(Equal(netip.MustParseAddr("192.168.16.1")))
			}},
		{"link-local IPv6 gateway", "ipamConfig: {contivCIDR: fe10::/64, serviceCIDR: fd00::/112, defaultGateway: 'fe80::1'}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.DefaultGateway).To(Equal(netip.MustParseAddr("fe80::1")))
			}},
		{"contivCIDR ignores the configured subnets and prefix lengths",
			"ipamConfig: {contivCIDR: 10.128.0.0/14, podSubnetCIDR: '', vxlanCIDR: 10.128.0.0/24, podSubnetOneNodePrefixLen: 0}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.ContivCIDR.String()).To(Equal("10.128.0.0/14"))
				g.Expect(p.IPAM.PodSubnetCIDR.String()).To(Equal("10.128.0.0/16"))
				g.Expect(p.IPAM.VxlanCIDR.String()).To(Equal("10.130.2.0/23"))
				g.Expect(p.IPAM.NodeInterconnectCIDR.String()).To(Equal("10.130.0.0/23"))
			}},
		{"contivCIDR IPv6", "ipamConfig: {contivCIDR: fe10::/64, serviceCIDR: fd00::/112}",
			func(g *WithT, p *Parsed) {
				g.Expect(p.IPAM.UseIPv6).To(BeTrue())
				g.Expect(p.IPAM.PodSubnetOneNodePrefixLen).To(BeEquivalentTo(121))
			}},
		{"compat keys in any case", "interfaceRxMode: Polling\nnodeToNodeTransport: SRv6\n",
			func(g *WithT, p *Parsed) {}},
		{"nodes", "nodeConfig: [{nodeName: a, gateway: 1.1.1.1, mainVPPInterface: {interfaceName: e, ip: 192.168.16.5/24}}, {nodeName: b}]",
			func(g *WithT, p *Parsed) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := parseYAML(t, tc.yaml)
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, p)
		})
	}
}

func TestParseNil(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse(nil)
	g.Expect(err).To(HaveOccurred())
}

func TestIPAMConfigJSONKeys(t *testing.T) {
	g := NewWithT(t)
	b, err := json.Marshal(IPAMConfigJSON{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(`{"srv6":{}}`), "omitempty as the original: the srv6 block always appears")
	d := DefaultConfig().IPAMConfig
	d.ContivCIDR, d.NodeInterconnectCIDR, d.DefaultGateway, d.UseExternalIPAM, d.NodeInterconnectDHCP = "a", "b", "c", true, true
	d.DualStack = &FamilyJSON{ContivCIDR: "d"}
	d.ExcludeIPs = []ExclusionJSON{{CIDR: "e", Owner: "f"}}
	d.ReserveLocalRoutes = true
	b, err = json.Marshal(d)
	g.Expect(err).NotTo(HaveOccurred())
	for _, k := range []string{"useExternalIPAM", "contivCIDR", "serviceCIDR", "nodeInterconnectDHCP", "podSubnetCIDR",
		"podSubnetOneNodePrefixLen", "vppHostSubnetCIDR", "vppHostSubnetOneNodePrefixLen", "nodeInterconnectCIDR",
		"vxlanCIDR", "defaultGateway", "srv6", "servicePolicyBSIDSubnetCIDR", "sfcIDLengthUsedInSidForServiceFunction",
		"dualStack", "excludeIPs", "cidr", "owner", "reserveLocalRoutes"} {
		g.Expect(strings.Contains(string(b), `"`+k+`":`)).To(BeTrue(), k)
	}
}

func TestFillDefaults(t *testing.T) {
	g := NewWithT(t)
	c, err := FillDefaults(Config{IPAMConfig: IPAMConfigJSON{PodSubnetCIDR: "1.2.128.0/17", PodSubnetOneNodePrefixLen: 29},
		NodeConfig: []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194"}}})
	g.Expect(err).NotTo(HaveOccurred())
	want := DefaultConfig()
	want.IPAMConfig.PodSubnetCIDR, want.IPAMConfig.PodSubnetOneNodePrefixLen = "1.2.128.0/17", 29
	want.NodeConfig = []NodeConfig{{NodeName: "node", Gateway: "3.4.5.194"}}
	g.Expect(c).To(Equal(want))
	g.Expect(c.Validate()).To(Succeed())

	c, err = FillDefaults(DefaultConfig())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c).To(Equal(DefaultConfig()))
}
