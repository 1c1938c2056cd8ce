package contivconf

import (
	"net"
)

// API is what other plugins read from contiv.conf. Every getter is safe for
// concurrent use once Init has returned; returned values are copies the
// caller may keep and modify.
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
	// defaultGateway), nil when there is none or DHCP is used. IPv4
	// addresses are 4-byte.
	GetStaticDefaultGW() net.IP
	// GetNodeConfig returns the nodeConfig entry for this node, nil if none.
	GetNodeConfig() *NodeConfig
}

// IPAMConfig is the parsed, effective ipamConfig.
type IPAMConfig struct {
	// UseExternalIPAM: pod IPs come from an external IPAM (CNI ipamData) and
	// this node's pod subnet is the Kubernetes node's pod CIDR.
	UseExternalIPAM bool
	// UseIPv6: the pod subnet (or contivCIDR) is IPv6.
	UseIPv6 bool
	// ContivCIDR is nil unless contivCIDR is set.
	ContivCIDR *net.IPNet
	// ServiceCIDR is the service network (never nil).
	ServiceCIDR *net.IPNet
	// NodeInterconnectDHCP: the node interconnect address comes from DHCP.
	NodeInterconnectDHCP bool
	// DefaultGateway is ipamConfig.defaultGateway, nil if unset.
	DefaultGateway net.IP
	// CustomIPAMSubnets are the effective subnets (after the contivCIDR
	// split when contivCIDR is set).
	CustomIPAMSubnets
}

// CustomIPAMSubnets are the subnets the node addresses are cut from.
type CustomIPAMSubnets struct {
	PodSubnetCIDR                 *net.IPNet
	PodSubnetOneNodePrefixLen     uint8
	VPPHostSubnetCIDR             *net.IPNet
	VPPHostSubnetOneNodePrefixLen uint8
	// NodeInterconnectCIDR is nil when undefined (no key, or DHCP with
	// contivCIDR).
	NodeInterconnectCIDR *net.IPNet
	VxlanCIDR            *net.IPNet
}
