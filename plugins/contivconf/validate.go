package contivconf

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
)

// Parsed is a validated contiv.conf: what Parse derives from a Config.
type Parsed struct {
	// IPAM is the effective IPAM configuration (contivCIDR split applied).
	IPAM IPAMConfig
	// SRv6 holds the parsed ipamConfig.srv6 prefixes.
	SRv6 SRv6Config

	// gwFamily is the subnet whose address family every gateway must have
	// (invalid when the subnets did not parse); for the NodeConfig CRD.
	gwFamily subnet
}

// SRv6Config is the parsed ipamConfig.srv6 block (see SRv6ConfigJSON):
// masked IPv6 prefixes.
type SRv6Config struct {
	ServicePolicyBSIDSubnetCIDR            netip.Prefix
	ServicePodLocalSIDSubnetCIDR           netip.Prefix
	ServiceHostLocalSIDSubnetCIDR          netip.Prefix
	ServiceNodeLocalSIDSubnetCIDR          netip.Prefix
	NodeToNodePodLocalSIDSubnetCIDR        netip.Prefix
	NodeToNodeHostLocalSIDSubnetCIDR       netip.Prefix
	NodeToNodePodPolicySIDSubnetCIDR       netip.Prefix
	NodeToNodeHostPolicySIDSubnetCIDR      netip.Prefix
	SFCPolicyBSIDSubnetCIDR                netip.Prefix
	SFCServiceFunctionSIDSubnetCIDR        netip.Prefix
	SFCEndLocalSIDSubnetCIDR               netip.Prefix
	SFCIDLengthUsedInSidForServiceFunction uint8
}

// Parse validates c and derives the effective configuration. Every problem
// is reported, joined with errors.Join; each message names the key and the
// value, e.g. `ipamConfig.podSubnetCIDR "1.2.3./19": invalid CIDR: ...`.
//
// Rules beyond "parses": one-node prefix lengths are longer than their
// cluster prefix, fit the address and leave the room IPAM needs (a pod
// subnet: 8 addresses, the network, gateway, NAT loopback, broadcast and
// at least one pod; a VPP-host subnet: 4 addresses); the node-interconnect
// subnet holds node ID 1 even past a gateway (4 addresses) and the vxlan
// subnet holds node ID 1 (2 addresses), so that every accepted config
// initialises IPAM;
// contivCIDR leaves at least 18 host bits; the effective pod, vpp-host,
// node-interconnect, vxlan and service subnets are of one address family and
// do not overlap; ipamConfig.defaultGateway and every nodeConfig gateway is
// a unicast address (not unspecified, loopback, multicast or the IPv4
// broadcast) of that family; nodeConfig names are non-empty and unique;
// enumerations and numeric ranges of the compatibility keys hold. A CIDR
// with host bits set ("1.2.3.4/16") means its network (1.2.0.0/16);
// IPv4-mapped IPv6 forms are rejected.
//
// ipamConfig.dualStack, when present, is a second address family checked
// by the same rules within itself (keys named ipamConfig.dualStack.<key>),
// without defaults (serviceCIDR is required, and the pod, vpp-host and
// vxlan keys unless its contivCIDR gives them), and of the other address
// family than the primary one. The gateways stay the primary family's. Each
// ipamConfig.excludeIPs cidr is an address (a /32 or /128) or a CIDR
// without host bits (here host bits are an error).
func Parse(c *Config) (*Parsed, error) {
	if c == nil {
		return nil, errors.New("no config")
	}
	v := &checker{}
	v.topLevel(c)
	out := &Parsed{}
	out.gwFamily = v.ipam(&c.IPAMConfig, &out.IPAM)
	v.srv6(&c.IPAMConfig.SRv6, &out.SRv6)
	v.nodeConfigs(c.NodeConfig, out.gwFamily)
	if err := errors.Join(v.errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// checker collects errors.
type checker struct{ errs []error }

func (v *checker) add(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

func (v *checker) addErr(err error) {
	if err != nil {
		v.errs = append(v.errs, err)
	}
}

func (v *checker) topLevel(c *Config) {
	v.intRange("mtuSize", c.MTUSize, 0, math.MaxUint32)
	if c.TAPInterfaceVersion != 1 && c.TAPInterfaceVersion != 2 {
		v.add("tapInterfaceVersion %d: want 1 or 2", c.TAPInterfaceVersion)
	}
	v.intRange("tapv2RxRingSize", int64(c.TAPv2RxRingSize), 0, math.MaxUint16)
	v.intRange("tapv2TxRingSize", int64(c.TAPv2TxRingSize), 0, math.MaxUint16)
	v.intRange("vmxnet3RxRingSize", int64(c.Vmxnet3RxRingSize), 0, math.MaxUint16)
	v.intRange("vmxnet3TxRingSize", int64(c.Vmxnet3TxRingSize), 0, math.MaxUint16)
	v.oneOf("interfaceRxMode", c.InterfaceRxMode, "", "polling", "interrupt", "adaptive")
	v.intRange("mainVRFID", c.MainVRFID, 0, math.MaxUint32)
	v.intRange("podVRFID", c.PodVRFID, 0, math.MaxUint32)
	v.oneOf("nodeToNodeTransport", c.NodeToNodeTransport, "vxlan", "srv6", "nooverlay")
	v.intRange("ipNeighborScanInterval", int64(c.IPNeighborScanInterval), 0, math.MaxUint8)
	v.intRange("ipNeighborStaleThreshold", int64(c.IPNeighborStaleThreshold), 0, math.MaxUint8)
	v.intRange("stnVersion", int64(c.STNVersion), 0, math.MaxUint8)
}

func (v *checker) intRange(key string, n, lo, hi int64) {
	if n < lo || n > hi {
		v.add("%s %d: want %d..%d", key, n, lo, hi)
	}
}

// oneOf accepts the allowed values in any letter case.
func (v *checker) oneOf(key, val string, allowed ...string) {
	for _, a := range allowed {
		if strings.EqualFold(val, a) {
			return
		}
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	v.add("%s %q: want one of %s", key, val, strings.Join(quoted, ", "))
}

// subnet is one configured or derived subnet, named for error messages.
type subnet struct {
	key    string       // "ipamConfig.podSubnetCIDR"
	text   string       // the value as written (or derived)
	from   string       // for a derived subnet: what it was derived from
	prefix netip.Prefix // masked; invalid = none
}

func (s subnet) String() string {
	if s.from != "" {
		return fmt.Sprintf("%s %q (derived from %s)", s.key, s.text, s.from)
	}
	return fmt.Sprintf("%s %q", s.key, s.text)
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// cidr parses value of key. Empty is an error unless optional.
func (v *checker) cidr(key, value string, optional bool) subnet {
	s := subnet{key: key, text: value}
	if value == "" && optional {
		return s
	}
	p, err := parsePrefix(value)
	if err != nil {
		v.add("%s %q: %w", key, value, err)
		return s
	}
	s.prefix = p.Masked()
	return s
}

// parsePrefix parses a CIDR, keeping host bits (the caller masks when it
// wants the network).
func parsePrefix(value string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(value)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("netip.ParsePrefix(%q): ", value))
		return netip.Prefix{}, fmt.Errorf("invalid CIDR (want address/length, e.g. 10.1.0.0/16): %s", msg)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, errors.New("IPv4-mapped IPv6 CIDRs are not supported: write the IPv4 form")
	}
	return p, nil
}

// parseIP parses an IP address (no zone, no IPv4-mapped IPv6 form).
func parseIP(value string) (netip.Addr, error) {
	a, err := netip.ParseAddr(value)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("ParseAddr(%q): ", value))
		return netip.Addr{}, fmt.Errorf("invalid IP address: %s", msg)
	}
	if a.Zone() != "" {
		return netip.Addr{}, errors.New("invalid IP address: zones are not allowed")
	}
	if a.Is4In6() {
		return netip.Addr{}, errors.New("IPv4-mapped IPv6 addresses are not supported: write the IPv4 form")
	}
	return a, nil
}

// parseGateway parses a default gateway: an IP address (parseIP) that is
// unicast and, when ref is valid, of ref's address family.
func parseGateway(value string, ref subnet) (netip.Addr, error) {
	a, err := parseIP(value)
	if err != nil {
		return netip.Addr{}, err
	}
	if !a.IsGlobalUnicast() && !a.IsLinkLocalUnicast() {
		return netip.Addr{}, errors.New("not a unicast host address (unspecified, loopback, multicast or broadcast)")
	}
	if ref.prefix.IsValid() && a.Is4() != ref.prefix.Addr().Is4() {
		return netip.Addr{}, fmt.Errorf("is %s but %s is %s: a gateway must be of the family of the subnets",
			family(a), ref, family(ref.prefix.Addr()))
	}
	return a, nil
}

// The key prefixes of the two families in messages.
const (
	primaryKeys   = "ipamConfig."
	dualStackKey  = "ipamConfig.dualStack"
	secondaryKeys = dualStackKey + "."
)

// ipam checks the ipamConfig block and fills out with the effective
// values. It returns the subnet whose family the gateways must have (the
// primary family's).
func (v *checker) ipam(ic *IPAMConfigJSON, out *IPAMConfig) subnet {
	out.UseExternalIPAM = ic.UseExternalIPAM
	out.NodeInterconnectDHCP = ic.NodeInterconnectDHCP
	out.ReserveLocalRoutes = ic.ReserveLocalRoutes

	pf := ic.primaryFamily()
	primary := v.family(&pf, familyKeys{prefix: primaryKeys}, ic.NodeInterconnectDHCP)
	if ic.DefaultGateway != "" {
		v.gateway("ipamConfig.defaultGateway", ic.DefaultGateway, primary.ref, &out.DefaultGateway)
	}
	if primary.ok {
		fc := primary.cfg
		out.UseIPv6, out.ContivCIDR, out.ServiceCIDR, out.CustomIPAMSubnets = fc.UseIPv6, fc.ContivCIDR, fc.ServiceCIDR, fc.CustomIPAMSubnets
	}
	if ic.DualStack != nil {
		// nodeInterconnectDHCP is the primary family's: the second
		// family's contivCIDR split keeps its node-interconnect block.
		second := v.family(ic.DualStack, familyKeys{prefix: secondaryKeys, noDefaults: true}, false)
		if v.otherFamily(primary, second) && second.ok {
			fc := second.cfg
			out.Second = &fc
		}
	}
	out.Exclusions = v.exclusions(ic.ExcludeIPs)
	return primary.ref
}

// gateway parses the gateway value of key into dst, or reports why not.
func (v *checker) gateway(key, value string, ref subnet, dst *netip.Addr) {
	gw, err := parseGateway(value, ref)
	if err != nil {
		v.add("%s %q: %w", key, value, err)
		return
	}
	*dst = gw
}

// srv6 parses the SRv6 prefixes (IPv6 only: SIDs are IPv6 addresses).
func (v *checker) srv6(s *SRv6ConfigJSON, out *SRv6Config) {
	for _, f := range []struct {
		key, value string
		dst        *netip.Prefix
	}{
		{"servicePolicyBSIDSubnetCIDR", s.ServicePolicyBSIDSubnetCIDR, &out.ServicePolicyBSIDSubnetCIDR},
		{"servicePodLocalSIDSubnetCIDR", s.ServicePodLocalSIDSubnetCIDR, &out.ServicePodLocalSIDSubnetCIDR},
		{"serviceHostLocalSIDSubnetCIDR", s.ServiceHostLocalSIDSubnetCIDR, &out.ServiceHostLocalSIDSubnetCIDR},
		{"serviceNodeLocalSIDSubnetCIDR", s.ServiceNodeLocalSIDSubnetCIDR, &out.ServiceNodeLocalSIDSubnetCIDR},
		{"nodeToNodePodLocalSIDSubnetCIDR", s.NodeToNodePodLocalSIDSubnetCIDR, &out.NodeToNodePodLocalSIDSubnetCIDR},
		{"nodeToNodeHostLocalSIDSubnetCIDR", s.NodeToNodeHostLocalSIDSubnetCIDR, &out.NodeToNodeHostLocalSIDSubnetCIDR},
		{"nodeToNodePodPolicySIDSubnetCIDR", s.NodeToNodePodPolicySIDSubnetCIDR, &out.NodeToNodePodPolicySIDSubnetCIDR},
		{"nodeToNodeHostPolicySIDSubnetCIDR", s.NodeToNodeHostPolicySIDSubnetCIDR, &out.NodeToNodeHostPolicySIDSubnetCIDR},
		{"sfcPolicyBSIDSubnetCIDR", s.SFCPolicyBSIDSubnetCIDR, &out.SFCPolicyBSIDSubnetCIDR},
		{"sfcServiceFunctionSIDSubnetCIDR", s.SFCServiceFunctionSIDSubnetCIDR, &out.SFCServiceFunctionSIDSubnetCIDR},
		{"sfcEndLocalSIDSubnetCIDR", s.SFCEndLocalSIDSubnetCIDR, &out.SFCEndLocalSIDSubnetCIDR},
	} {
		sub := v.cidr("ipamConfig.srv6."+f.key, f.value, false)
		if !sub.prefix.IsValid() {
			continue
		}
		if !sub.prefix.Addr().Is6() {
			v.add("%s: must be IPv6 (SRv6 SIDs are IPv6 addresses)", sub)
			continue
		}
		*f.dst = sub.prefix
	}
	const key = "ipamConfig.srv6.sfcIDLengthUsedInSidForServiceFunction"
	n := s.SFCIDLengthUsedInSidForServiceFunction
	maxLen := 128
	if out.SFCServiceFunctionSIDSubnetCIDR.IsValid() {
		maxLen = 128 - out.SFCServiceFunctionSIDSubnetCIDR.Bits()
	}
	if n < 0 || n > maxLen {
		v.add("%s %d: want 0..%d (the bits left after ipamConfig.srv6.sfcServiceFunctionSIDSubnetCIDR %q)",
			key, n, maxLen, s.SFCServiceFunctionSIDSubnetCIDR)
		return
	}
	out.SFCIDLengthUsedInSidForServiceFunction = uint8(n)
}

// nodeConfigs checks every nodeConfig entry; gateways must be of ref's
// family.
func (v *checker) nodeConfigs(nodes []NodeConfig, ref subnet) {
	seen := make(map[string]int, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		prefix := fmt.Sprintf("nodeConfig[%d]", i)
		switch first, dup := seen[n.NodeName]; {
		case n.NodeName == "":
			v.add("%s.nodeName %q: must not be empty", prefix, n.NodeName)
		case dup:
			v.add("%s.nodeName %q: duplicate of nodeConfig[%d]", prefix, n.NodeName, first)
		default:
			seen[n.NodeName] = i
		}
		for _, err := range checkNode(prefix+".", n, ref) {
			v.addErr(err)
		}
	}
}

// checkNode checks the addresses of one node configuration: its gateway
// must be of ref's family (parseGateway); keyPrefix prefixes every key in
// the messages.
func checkNode(keyPrefix string, n *NodeConfig, ref subnet) []error {
	var errs []error
	if n.Gateway != "" {
		if _, err := parseGateway(n.Gateway, ref); err != nil {
			errs = append(errs, fmt.Errorf("%sgateway %q: %w", keyPrefix, n.Gateway, err))
		}
	}
	check := func(key, ip string) {
		if ip == "" {
			return
		}
		if _, err := parsePrefix(ip); err != nil {
			errs = append(errs, fmt.Errorf("%s%s %q: %w", keyPrefix, key, ip, err))
		}
	}
	check("mainVPPInterface.ip", n.MainVPPInterface.IP)
	for i, o := range n.OtherVPPInterfaces {
		check(fmt.Sprintf("otherVPPInterfaces[%d].ip", i), o.IP)
	}
	return errs
}
