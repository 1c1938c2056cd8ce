package contivconf

import (
	"net/netip"
)

// API is what other plugins read from contiv.conf. Every getter is safe for
// concurrent use once Init has returned; returned values are copies the
// caller may keep and modify. Subnets and addresses are netip values: an
// invalid (zero) value means "none".
type API interface {
	// GetIPAMConfig returns the effective IPAM settings: parsed, validated,
	// and with the contivCIDR split (spec §2.12) already applied to
	// CustomIPAMSubnets.
	GetIPAMConfig() *IPAMConfig
	// GetIPAMConfigForJSON returns the ipamConfig block as read from the
	// file (defaults filled in), for REST output.
	GetIPAMConfigForJSON() *IPAMConfigJSON
	// GetStaticDefaultGW returns this node's static default gateway (the
	// nodeConfig entry's gateway for this node, else ipamConfig's
	// defaultGateway); the zero Addr when there is none or DHCP is used.
	// It is validated: a unicast address of the family of the IPAM subnets.
	GetStaticDefaultGW() netip.Addr
	// GetNodeConfig returns the nodeConfig entry for this node, nil if none.
	GetNodeConfig() *NodeConfig
}

// IPAMConfig is the parsed, effective ipamConfig. Every prefix is masked.
// UseIPv6, ContivCIDR, ServiceCIDR and CustomIPAMSubnets are the primary
// family's; Second is the other family in a dual-stack config. Families
// lists both.
type IPAMConfig struct {
	// UseExternalIPAM: pod IPs come from an external IPAM (CNI ipamData) and
	// this node's pod subnet is the Kubernetes node's pod CIDR.
	UseExternalIPAM bool
	// UseIPv6: the pod subnet (or contivCIDR) is IPv6.
	UseIPv6 bool
	// ContivCIDR is invalid (zero) unless contivCIDR is set.
	ContivCIDR netip.Prefix
	// ServiceCIDR is the service network (always valid).
	ServiceCIDR netip.Prefix
	// NodeInterconnectDHCP: the node interconnect address comes from DHCP.
	NodeInterconnectDHCP bool
	// DefaultGateway is ipamConfig.defaultGateway, invalid (zero) if unset.
	DefaultGateway netip.Addr
	// CustomIPAMSubnets are the effective subnets (after the contivCIDR
	// split when contivCIDR is set).
	CustomIPAMSubnets

	// Second is the dual-stack second family (ipamConfig.dualStack); nil when single-stack.
	Second *FamilyConfig
	// Exclusions are ipamConfig.excludeIPs, each masked; a bare address is a /32 or /128.
	Exclusions []Exclusion
	// ReserveLocalRoutes is ipamConfig.reserveLocalRoutes.
	ReserveLocalRoutes bool
}

// FamilyConfig is the subnets of one address family.
type FamilyConfig struct {
	UseIPv6           bool
	ContivCIDR        netip.Prefix // zero unless set
	ServiceCIDR       netip.Prefix
	CustomIPAMSubnets // effective subnets after the contivCIDR split
}

// Exclusion is one entry of ipamConfig.excludeIPs.
type Exclusion struct {
	Prefix netip.Prefix
	Owner  string // "contiv.conf" when not given
}

// DefaultExclusionOwner is the Owner of an excludeIPs entry without one.
const DefaultExclusionOwner = "contiv.conf"

// Families returns the address families in order: the primary family
// (UseIPv6, ContivCIDR, ServiceCIDR and CustomIPAMSubnets) first, then
// *Second when set. Both are cut for the same node ID; each family's
// subnets may allow a different number of nodes (the smaller bounds the
// node ID). nil for a nil c.
func (c *IPAMConfig) Families() []FamilyConfig {
	if c == nil {
		return nil
	}
	out := make([]FamilyConfig, 1, 2)
	out[0] = FamilyConfig{UseIPv6: c.UseIPv6, ContivCIDR: c.ContivCIDR, ServiceCIDR: c.ServiceCIDR,
		CustomIPAMSubnets: c.CustomIPAMSubnets}
	if c.Second != nil {
		out = append(out, *c.Second)
	}
	return out
}

// CustomIPAMSubnets are the subnets the node addresses are cut from; all
// valid and of one family except NodeInterconnectCIDR, which may be
// undefined.
type CustomIPAMSubnets struct {
	PodSubnetCIDR                 netip.Prefix
	PodSubnetOneNodePrefixLen     int
	VPPHostSubnetCIDR             netip.Prefix
	VPPHostSubnetOneNodePrefixLen int
	// NodeInterconnectCIDR is invalid (zero) when undefined (no key, or
	// DHCP with contivCIDR).
	NodeInterconnectCIDR netip.Prefix
	VxlanCIDR            netip.Prefix
}
