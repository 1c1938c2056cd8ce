package contivconf

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// flowMap renders keys (in order) with their vals as a YAML flow mapping;
// kv ("key", "value" pairs) replaces or adds values, and the value "-"
// drops a key. Numbers stay bare, everything else is quoted.
func flowMap(keys []string, vals map[string]string, kv ...string) string {
	vals = clonedMap(vals)
	keys = append([]string(nil), keys...)
	for i := 0; i+1 < len(kv); i += 2 {
		if !slices.Contains(keys, kv[i]) {
			keys = append(keys, kv[i])
		}
		vals[kv[i]] = kv[i+1]
	}
	var parts []string
	for _, k := range keys {
		v := vals[k]
		switch _, err := strconv.Atoi(v); {
		case v == "-":
		case err == nil:
			parts = append(parts, k+": "+v)
		default:
			parts = append(parts, fmt.Sprintf("%s: %q", k, v))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func clonedMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// The keys of a family in the order the sample lists them.
var familyKeyOrder = []string{"contivCIDR", "serviceCIDR", "podSubnetCIDR", "podSubnetOneNodePrefixLen",
	"vppHostSubnetCIDR", "vppHostSubnetOneNodePrefixLen", "nodeInterconnectCIDR", "vxlanCIDR"}

// The IPv6 family of the sample's dualStack example, and an IPv4 family
// that does not collide with the defaults.
var (
	ipv6Family = map[string]string{"serviceCIDR": "fd00:96::/112", "podSubnetCIDR": "fd00:10:1::/48",
		"podSubnetOneNodePrefixLen": "64", "vppHostSubnetCIDR": "fd00:30::/48", "vppHostSubnetOneNodePrefixLen": "64",
		"nodeInterconnectCIDR": "fd00:16::/64", "vxlanCIDR": "fd00:17::/64"}
	ipv4Family = map[string]string{"serviceCIDR": "10.96.0.0/12", "podSubnetCIDR": "10.1.0.0/16",
		"podSubnetOneNodePrefixLen": "24", "vppHostSubnetCIDR": "172.30.0.0/16", "vppHostSubnetOneNodePrefixLen": "24",
		"nodeInterconnectCIDR": "192.168.16.0/24", "vxlanCIDR": "192.168.30.0/24"}
)

// dualStackIPAM is the default (IPv4) ipamConfig with a dualStack block of
// the sample's IPv6 subnets, kv applied to the block (see flowMap).
func dualStackIPAM(kv ...string) string {
	return "ipamConfig: {dualStack: " + flowMap(familyKeyOrder, ipv6Family, kv...) + "}"
}

// ipv6PrimaryIPAM is an IPv6 ipamConfig (ipv6Family's subnets as the
// primary ones) with a dualStack block of IPv4 subnets, kv applied to the
// block.
func ipv6PrimaryIPAM(kv ...string) string {
	primary := flowMap(familyKeyOrder, ipv6Family)
	return "ipamConfig: {" + strings.Trim(primary, "{}") + ", dualStack: " + flowMap(familyKeyOrder, ipv4Family, kv...) + "}"
}

// withIPAMKeys adds keys (flow-mapping entries) to the ipamConfig flow
// mapping doc (as dualStackIPAM returns).
func withIPAMKeys(doc, keys string) string {
	return strings.TrimSuffix(doc, "}") + ", " + keys + "}"
}

func TestDualStackValidationErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"both IPv4", "ipamConfig: {dualStack: " + flowMap(familyKeyOrder, ipv4Family, "podSubnetCIDR", "10.2.0.0/16") + "}",
			[]string{`ipamConfig.dualStack.podSubnetCIDR "10.2.0.0/16" and ipamConfig.podSubnetCIDR "10.1.0.0/16" are both IPv4: ` +
				`ipamConfig.dualStack must be of the other address family`}},
		{"both IPv6", "ipamConfig: {" + strings.Trim(flowMap(familyKeyOrder, ipv6Family), "{}") + ", dualStack: " +
			flowMap(familyKeyOrder, ipv6Family, "podSubnetCIDR", "fd00:20::/48") + "}",
			[]string{`ipamConfig.dualStack.podSubnetCIDR "fd00:20::/48" and ipamConfig.podSubnetCIDR "fd00:10:1::/48" are both IPv6`}},
		{"both IPv6, second from contivCIDR", "ipamConfig: {contivCIDR: 'fe10::/64', serviceCIDR: 'fd00::/112', " +
			"dualStack: {contivCIDR: 'fe20::/64', serviceCIDR: 'fd01::/112'}}",
			[]string{`ipamConfig.dualStack.podSubnetCIDR "fe20::/112" (derived from ipamConfig.dualStack.contivCIDR "fe20::/64") and ` +
				`ipamConfig.podSubnetCIDR "fe10::/112" (derived from ipamConfig.contivCIDR "fe10::/64") are both IPv6`}},
		{"empty block: every required key is named", "ipamConfig: {dualStack: {}}",
			[]string{`ipamConfig.dualStack.serviceCIDR "": required in ipamConfig.dualStack (it has no defaults)`,
				`ipamConfig.dualStack.podSubnetCIDR "": required in ipamConfig.dualStack (it has no defaults) unless ipamConfig.dualStack.contivCIDR gives it`,
				`ipamConfig.dualStack.podSubnetOneNodePrefixLen 0: required in ipamConfig.dualStack`,
				`ipamConfig.dualStack.vppHostSubnetCIDR "": required`,
				`ipamConfig.dualStack.vppHostSubnetOneNodePrefixLen 0: required`,
				`ipamConfig.dualStack.vxlanCIDR "": required`}},
		{"service CIDR required with contivCIDR", dualStackIPAM("contivCIDR", "fe10::/64", "serviceCIDR", "-"),
			[]string{`ipamConfig.dualStack.serviceCIDR "": required in ipamConfig.dualStack (it has no defaults)`}},
		{"one-node length missing", dualStackIPAM("vppHostSubnetOneNodePrefixLen", "-"),
			[]string{`ipamConfig.dualStack.vppHostSubnetOneNodePrefixLen 0: required in ipamConfig.dualStack`}},
		{"bad CIDR", dualStackIPAM("vxlanCIDR", "fd00:17::/129"),
			[]string{`ipamConfig.dualStack.vxlanCIDR "fd00:17::/129": invalid CIDR`}},
		{"bad contivCIDR", dualStackIPAM("contivCIDR", "fe10::/64x"),
			[]string{`ipamConfig.dualStack.contivCIDR "fe10::/64x": invalid CIDR`}},
		{"contivCIDR too small", dualStackIPAM("contivCIDR", "fe10::/120"),
			[]string{`ipamConfig.dualStack.contivCIDR "fe10::/120": ContivCIDR is not valid, network must provide at least 18bit space`}},
		{"one-node not longer", dualStackIPAM("podSubnetOneNodePrefixLen", "40"),
			[]string{`ipamConfig.dualStack.podSubnetOneNodePrefixLen 40: must be longer than the prefix length 48 of ipamConfig.dualStack.podSubnetCIDR "fd00:10:1::/48"`}},
		{"pod subnet without a pod address", dualStackIPAM("podSubnetOneNodePrefixLen", "126"),
			[]string{`ipamConfig.dualStack.podSubnetOneNodePrefixLen 126: leaves 4 addresses per node`, "use at most 125"}},
		{"pod subnet without a pod address IPv4", ipv6PrimaryIPAM("podSubnetOneNodePrefixLen", "30"),
			[]string{`ipamConfig.dualStack.podSubnetOneNodePrefixLen 30: leaves 4 addresses per node`, "use at most 29"}},
		{"VPP-host subnet too small", dualStackIPAM("vppHostSubnetOneNodePrefixLen", "127"),
			[]string{`ipamConfig.dualStack.vppHostSubnetOneNodePrefixLen 127: leaves 2 addresses per node`, "use at most 126"}},
		{"one-node too long", dualStackIPAM("podSubnetOneNodePrefixLen", "129"),
			[]string{`ipamConfig.dualStack.podSubnetOneNodePrefixLen 129: exceeds the 128-bit address length of ipamConfig.dualStack.podSubnetCIDR`}},
		{"node interconnect too small", dualStackIPAM("nodeInterconnectCIDR", "fd00:16::/127"),
			[]string{`ipamConfig.dualStack.nodeInterconnectCIDR "fd00:16::/127": has 2 address(es)`, "at most 126"}},
		{"vxlan too small", ipv6PrimaryIPAM("vxlanCIDR", "192.168.30.1/32"),
			[]string{`ipamConfig.dualStack.vxlanCIDR "192.168.30.1/32": has 1 address(es)`, "at most 31"}},
		{"mixed families within the block", dualStackIPAM("vxlanCIDR", "192.168.31.0/24"),
			[]string{`ipamConfig.dualStack.vxlanCIDR "192.168.31.0/24" is IPv4 but ipamConfig.dualStack.podSubnetCIDR "fd00:10:1::/48" is IPv6`}},
		{"mixed families with contivCIDR", dualStackIPAM("contivCIDR", "fe10::/64", "serviceCIDR", "10.200.0.0/16"),
			[]string{`ipamConfig.dualStack.serviceCIDR "10.200.0.0/16" is IPv4 but ipamConfig.dualStack.contivCIDR "fe10::/64" is IPv6`}},
		{"overlap within the block", dualStackIPAM("serviceCIDR", "fd00:10:1:5::/112"),
			[]string{`ipamConfig.dualStack.podSubnetCIDR "fd00:10:1::/48" overlaps ipamConfig.dualStack.serviceCIDR "fd00:10:1:5::/112"`}},
		{"overlap with derived", dualStackIPAM("contivCIDR", "fe10::/64", "nodeInterconnectCIDR", "fe10::1:0/120"),
			[]string{`ipamConfig.dualStack.vppHostSubnetCIDR "fe10::1:0/112" (derived from ipamConfig.dualStack.contivCIDR "fe10::/64") ` +
				`overlaps ipamConfig.dualStack.nodeInterconnectCIDR "fe10::1:0/120"`}},
		{"IPv4-mapped", dualStackIPAM("podSubnetCIDR", "::ffff:10.1.0.0/112"),
			[]string{`ipamConfig.dualStack.podSubnetCIDR "::ffff:10.1.0.0/112": IPv4-mapped`}},
		// defaultGateway and nodeConfig gateways are the primary family's.
		{"gateway of the second family", "ipamConfig: {defaultGateway: 'fd00:16::fe', dualStack: " + flowMap(familyKeyOrder, ipv6Family) + "}",
			[]string{`ipamConfig.defaultGateway "fd00:16::fe": is IPv6 but ipamConfig.podSubnetCIDR "10.1.0.0/16" is IPv4`}},
		{"node gateway of the second family", dualStackIPAM() + "\nnodeConfig: [{nodeName: a, gateway: 'fd00:16::fe'}]",
			[]string{`nodeConfig[0].gateway "fd00:16::fe": is IPv6 but ipamConfig.podSubnetCIDR "10.1.0.0/16" is IPv4`}},
		{"every error at once", withIPAMKeys(dualStackIPAM("podSubnetCIDR", "x", "serviceCIDR", "-"),
			"podSubnetCIDR: 1.2.3./19, excludeIPs: [{cidr: 10.1.5.7/24}]"),
			[]string{`ipamConfig.podSubnetCIDR "1.2.3./19"`, `ipamConfig.dualStack.podSubnetCIDR "x"`,
				`ipamConfig.dualStack.serviceCIDR ""`, `ipamConfig.excludeIPs[0].cidr "10.1.5.7/24"`}},
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

func TestExclusionErrors(t *testing.T) {
	cases := []struct{ name, cidr, want string }{
		{"host bits", "10.1.5.7/24", `ipamConfig.excludeIPs[1].cidr "10.1.5.7/24": host bits set: write the network 10.1.5.0/24`},
		{"host bits IPv6", "fd00:10:1:5::41/124", `ipamConfig.excludeIPs[1].cidr "fd00:10:1:5::41/124": host bits set: write the network fd00:10:1:5::40/124`},
		{"bad address", "10.1.5.300", `ipamConfig.excludeIPs[1].cidr "10.1.5.300": invalid IP address`},
		{"bad length", "10.1.5.0/33", `ipamConfig.excludeIPs[1].cidr "10.1.5.0/33": invalid CIDR`},
		{"empty", "", `ipamConfig.excludeIPs[1].cidr "": missing: want an address or a CIDR`},
		{"IPv4-mapped address", "::ffff:10.1.5.7", `ipamConfig.excludeIPs[1].cidr "::ffff:10.1.5.7": IPv4-mapped`},
		{"IPv4-mapped CIDR", "::ffff:10.1.5.0/120", `ipamConfig.excludeIPs[1].cidr "::ffff:10.1.5.0/120": IPv4-mapped`},
		{"zone", "fe80::1%eth0", `ipamConfig.excludeIPs[1].cidr "fe80::1%eth0": invalid IP address: zones are not allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := parseYAML(t, fmt.Sprintf("ipamConfig: {excludeIPs: [{cidr: 10.1.5.7}, {cidr: %q}]}", tc.cidr))
			g.Expect(p).To(BeNil())
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			g.Expect(strings.Count(err.Error(), "excludeIPs")).To(Equal(1), "the good entry is not reported")
		})
	}
}

func TestDualStackValidConfigs(t *testing.T) {
	pfx := netip.MustParsePrefix
	cases := []struct {
		name  string
		yaml  string
		check func(g *WithT, c *IPAMConfig)
	}{
		{"IPv4 primary, IPv6 second (the sample's example)", dualStackIPAM(),
			func(g *WithT, c *IPAMConfig) {
				g.Expect(c.UseIPv6).To(BeFalse())
				g.Expect(c.PodSubnetCIDR).To(Equal(pfx("10.1.0.0/16")))
				g.Expect(c.Second).To(Equal(&FamilyConfig{UseIPv6: true, ServiceCIDR: pfx("fd00:96::/112"),
					CustomIPAMSubnets: CustomIPAMSubnets{
						PodSubnetCIDR: pfx("fd00:10:1::/48"), PodSubnetOneNodePrefixLen: 64,
						VPPHostSubnetCIDR: pfx("fd00:30::/48"), VPPHostSubnetOneNodePrefixLen: 64,
						NodeInterconnectCIDR: pfx("fd00:16::/64"), VxlanCIDR: pfx("fd00:17::/64"),
					}}))
			}},
		{"IPv6 primary, IPv4 second", ipv6PrimaryIPAM(),
			func(g *WithT, c *IPAMConfig) {
				g.Expect(c.UseIPv6).To(BeTrue())
				g.Expect(c.PodSubnetCIDR).To(Equal(pfx("fd00:10:1::/48")))
				g.Expect(c.ServiceCIDR).To(Equal(pfx("fd00:96::/112")))
				g.Expect(c.Second).To(Equal(&FamilyConfig{UseIPv6: false, ServiceCIDR: pfx("10.96.0.0/12"),
					CustomIPAMSubnets: CustomIPAMSubnets{
						PodSubnetCIDR: pfx("10.1.0.0/16"), PodSubnetOneNodePrefixLen: 24,
						VPPHostSubnetCIDR: pfx("172.30.0.0/16"), VPPHostSubnetOneNodePrefixLen: 24,
						NodeInterconnectCIDR: pfx("192.168.16.0/24"), VxlanCIDR: pfx("192.168.30.0/24"),
					}}))
			}},
		{"IPv4 primary, IPv6 second without node interconnect", dualStackIPAM("nodeInterconnectCIDR", "-"),
			func(g *WithT, c *IPAMConfig) {
				g.Expect(c.Second.NodeInterconnectCIDR.IsValid()).To(BeFalse())
			}},
		{"IPv4 primary, IPv6 second from contivCIDR (the other keys ignored)",
			dualStackIPAM("contivCIDR", "fe10::/64", "podSubnetCIDR", "-", "podSubnetOneNodePrefixLen", "-", "nodeInterconnectCIDR", "-"),
			func(g *WithT, c *IPAMConfig) {
				s := c.Second
				g.Expect(s.ContivCIDR).To(Equal(pfx("fe10::/64")))
				g.Expect(s.PodSubnetCIDR).To(Equal(pfx("fe10::/112")))
				g.Expect(s.PodSubnetOneNodePrefixLen).To(Equal(121))
				g.Expect(s.VPPHostSubnetCIDR).To(Equal(pfx("fe10::1:0/112")))
				g.Expect(s.NodeInterconnectCIDR).To(Equal(pfx("fe10::2:0/119")))
				g.Expect(s.VxlanCIDR).To(Equal(pfx("fe10::2:200/119")))
			}},
		{"IPv6 primary from contivCIDR with DHCP, IPv4 second from contivCIDR keeps its node interconnect",
			"ipamConfig: {contivCIDR: 'fe10::/64', serviceCIDR: 'fd00::/112', nodeInterconnectDHCP: true, " +
				"dualStack: {contivCIDR: 10.128.0.0/14, serviceCIDR: 10.96.0.0/12}}",
			func(g *WithT, c *IPAMConfig) {
				g.Expect(c.UseIPv6).To(BeTrue())
				g.Expect(c.NodeInterconnectCIDR.IsValid()).To(BeFalse(), "DHCP: no node interconnect in the primary family")
				g.Expect(c.Second.UseIPv6).To(BeFalse())
				g.Expect(c.Second.PodSubnetCIDR).To(Equal(pfx("10.128.0.0/16")))
				g.Expect(c.Second.NodeInterconnectCIDR).To(Equal(pfx("10.130.0.0/23")))
			}},
		{"families holding different numbers of nodes", dualStackIPAM("podSubnetCIDR", "fd00:10:1::/60"),
			func(g *WithT, c *IPAMConfig) {
				g.Expect(c.PodSubnetCIDR.Bits()).To(Equal(16), "256 node subnets")
				g.Expect(c.Second.PodSubnetCIDR.Bits()).To(Equal(60), "16 node subnets")
			}},
		{"exclusions and reserveLocalRoutes", withIPAMKeys(dualStackIPAM(), `excludeIPs: [
			{cidr: 10.1.5.7, owner: gateway appliance}, {cidr: 'fd00:10:1:5::40/124'}, {cidr: 'fd00:10:1:5::1'},
			{cidr: 192.0.2.0/24, owner: outside every pod subnet}, {cidr: 10.1.5.7}], reserveLocalRoutes: true`),
			func(g *WithT, c *IPAMConfig) {
				g.Expect(c.Exclusions).To(Equal([]Exclusion{
					{Prefix: pfx("10.1.5.7/32"), Owner: "gateway appliance"},
					{Prefix: pfx("fd00:10:1:5::40/124"), Owner: "contiv.conf"},
					{Prefix: pfx("fd00:10:1:5::1/128"), Owner: "contiv.conf"},
					{Prefix: pfx("192.0.2.0/24"), Owner: "outside every pod subnet"},
					{Prefix: pfx("10.1.5.7/32"), Owner: "contiv.conf"},
				}))
				g.Expect(c.ReserveLocalRoutes).To(BeTrue())
			}},
		{"exclusions single-stack", "ipamConfig: {excludeIPs: [{cidr: 10.1.0.0/16}, {cidr: '::/0'}]}",
			func(g *WithT, c *IPAMConfig) {
				g.Expect(c.Second).To(BeNil())
				g.Expect(c.Exclusions).To(HaveLen(2))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := parseYAML(t, tc.yaml)
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, &p.IPAM)
			checkEffective(t, &p.IPAM)
		})
	}
}

func TestFamilies(t *testing.T) {
	g := NewWithT(t)
	p, err := parseYAML(t, "")
	g.Expect(err).NotTo(HaveOccurred())
	single := p.IPAM.Families()
	g.Expect(single).To(Equal([]FamilyConfig{{UseIPv6: false, ServiceCIDR: p.IPAM.ServiceCIDR,
		CustomIPAMSubnets: p.IPAM.CustomIPAMSubnets}}))
	g.Expect(p.IPAM.Second).To(BeNil(), "a single-stack file stays single-stack")
	g.Expect(p.IPAM.Exclusions).To(BeNil())
	g.Expect(p.IPAM.ReserveLocalRoutes).To(BeFalse())

	p, err = parseYAML(t, "ipamConfig: {contivCIDR: 10.128.0.0/14, dualStack: {contivCIDR: 'fe10::/64', serviceCIDR: 'fd00::/112'}}")
	g.Expect(err).NotTo(HaveOccurred())
	fs := p.IPAM.Families()
	g.Expect(fs).To(HaveLen(2))
	g.Expect(fs[0].UseIPv6).To(BeFalse())
	g.Expect(fs[0].ContivCIDR.String()).To(Equal("10.128.0.0/14"))
	g.Expect(fs[0].CustomIPAMSubnets).To(Equal(p.IPAM.CustomIPAMSubnets))
	g.Expect(fs[1]).To(Equal(*p.IPAM.Second))
	g.Expect(fs[1].ContivCIDR.String()).To(Equal("fe10::/64"))
	fs[1].PodSubnetCIDR = netip.Prefix{}
	g.Expect(p.IPAM.Second.PodSubnetCIDR.IsValid()).To(BeTrue(), "Families returns copies")

	var nilConf *IPAMConfig
	g.Expect(nilConf.Families()).To(BeNil())
}

// The JSON form (REST output of GetIPAMConfigForJSON) decodes back to the
// same config, new keys included.
func TestDualStackJSONRoundTrip(t *testing.T) {
	g := NewWithT(t)
	c, err := DecodeConfig([]byte(dualStackIPAM()+"\n"), "t")
	g.Expect(err).NotTo(HaveOccurred())
	c.IPAMConfig.ExcludeIPs = []ExclusionJSON{{CIDR: "10.1.5.7", Owner: "gw"}, {CIDR: "fd00:10:1:5::40/124"}}
	c.IPAMConfig.ReserveLocalRoutes = true
	b, err := json.Marshal(c.IPAMConfig)
	g.Expect(err).NotTo(HaveOccurred())
	for _, k := range []string{`"dualStack":{`, `"excludeIPs":[{"cidr":"10.1.5.7","owner":"gw"},{"cidr":"fd00:10:1:5::40/124"}]`,
		`"reserveLocalRoutes":true`, `"podSubnetOneNodePrefixLen":64`} {
		g.Expect(string(b)).To(ContainSubstring(k))
	}
	back, err := DecodeConfig([]byte(`{"ipamConfig":`+string(b)+`}`), "t")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.IPAMConfig).To(Equal(c.IPAMConfig))
	g.Expect(back.Validate()).To(Succeed())

	filled, err := FillDefaults(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(filled).To(Equal(c))

	b, err = json.Marshal(DefaultConfig().IPAMConfig)
	g.Expect(err).NotTo(HaveOccurred())
	for _, k := range []string{"dualStack", "excludeIPs", "reserveLocalRoutes"} {
		g.Expect(string(b)).NotTo(ContainSubstring(k), "single-stack output is unchanged")
	}
}

func TestDualStackGettersReturnCopies(t *testing.T) {
	g := NewWithT(t)
	c, err := DecodeConfig([]byte(dualStackIPAM()+"\n"), "t")
	g.Expect(err).NotTo(HaveOccurred())
	c.IPAMConfig.ExcludeIPs = []ExclusionJSON{{CIDR: "10.1.5.7"}}
	p := initPlugin(t, c, "node")

	ipam := p.GetIPAMConfig()
	ipam.Second.PodSubnetCIDR = netip.Prefix{}
	ipam.Exclusions[0].Owner = "x"
	g.Expect(p.GetIPAMConfig().Second.PodSubnetCIDR.String()).To(Equal("fd00:10:1::/48"))
	g.Expect(p.GetIPAMConfig().Exclusions[0].Owner).To(Equal("contiv.conf"))

	js := p.GetIPAMConfigForJSON()
	js.DualStack.PodSubnetCIDR = "x"
	js.ExcludeIPs[0].CIDR = "x"
	g.Expect(p.GetIPAMConfigForJSON().DualStack.PodSubnetCIDR).To(Equal("fd00:10:1::/48"))
	g.Expect(p.GetIPAMConfigForJSON().ExcludeIPs[0].CIDR).To(Equal("10.1.5.7"))

	all := p.GetConfig()
	all.IPAMConfig.DualStack.VxlanCIDR = "x"
	all.IPAMConfig.ExcludeIPs[0].Owner = "x"
	g.Expect(p.GetConfig().IPAMConfig.DualStack.VxlanCIDR).To(Equal("fd00:17::/64"))
	g.Expect(p.GetConfig().IPAMConfig.ExcludeIPs[0].Owner).To(BeEmpty())
}

// conf/contiv-dualstack.conf is conf/contiv.conf plus a dualStack block: it
// loads through the plugin (file selection, strict decoding) and
// validates.
func TestShippedDualStackConf(t *testing.T) {
	g := NewWithT(t)
	path, err := filepath.Abs(filepath.Join("..", "..", "conf", "contiv-dualstack.conf"))
	g.Expect(err).NotTo(HaveOccurred())
	p, err := fileResult(t, "-contiv-config", path)
	g.Expect(err).NotTo(HaveOccurred())
	ipam := p.GetIPAMConfig()
	g.Expect(ipam.UseIPv6).To(BeFalse())
	g.Expect(ipam.Second).NotTo(BeNil())
	g.Expect(ipam.Second.UseIPv6).To(BeTrue())
	g.Expect(ipam.Families()).To(HaveLen(2))

	// The IPv4 part is conf/contiv.conf's.
	single, err := os.ReadFile(filepath.Join("..", "..", "conf", "contiv.conf"))
	g.Expect(err).NotTo(HaveOccurred())
	sc, err := DecodeConfig(single, "contiv.conf")
	g.Expect(err).NotTo(HaveOccurred())
	sp, err := Parse(&sc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ipam.Families()[0]).To(Equal(sp.IPAM.Families()[0]))
	g.Expect(sp.IPAM.Second).To(BeNil())
}
