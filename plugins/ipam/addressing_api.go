package ipam

import (
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
)

// The addressing of package addressing, under the names the IPAM API has
// always had.
var (
	// ErrNodeIDRange: the node ID does not fit the subnet.
	ErrNodeIDRange = addressing.ErrNodeIDRange
	// ErrUndefined: the subnet the address is cut from is not configured.
	ErrUndefined = addressing.ErrUndefined
)

// NodeIDFits reports whether cfg gives node ID id everything the agent
// derives for a node (see addressing.NodeIDFits).
func NodeIDFits(cfg *contivconf.IPAMConfig, gw netip.Addr, id uint32) bool {
	return addressing.NodeIDFits(cfg, gw, id)
}

// MaxNodeID is the largest node ID cfg gives everything the agent derives
// for a node (see addressing.MaxNodeID).
func MaxNodeID(cfg *contivconf.IPAMConfig, gw netip.Addr) uint32 {
	return addressing.MaxNodeID(cfg, gw)
}
