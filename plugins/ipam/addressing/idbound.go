package addressing

import (
	"math"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/contivconf"
)

// NodeIDFits reports whether cfg gives node ID id everything the agent
// derives for a node: a pod subnet (also with an external IPAM, whose
// node falls back to it until Kubernetes gives it a pod CIDR), a VPP-host
// subnet with room for its two hosts, a VXLAN address and, when
// nodeInterconnectCIDR is set, a node-interconnect address (gw, the static
// default gateway, is stepped over as NodeIPAddress does).
//
// A dual-stack config must fit the ID in both families (cut from the same
// ID); the static default gateway is the primary family's.
func NodeIDFits(cfg *contivconf.IPAMConfig, gw netip.Addr, id uint32) bool {
	if cfg == nil || id == 0 {
		return false
	}
	for i, fc := range cfg.Families() {
		if i > 0 {
			gw = netip.Addr{}
		}
		if !familyFits(fc, gw, id) {
			return false
		}
	}
	return true
}

// familyFits is NodeIDFits for one family.
func familyFits(cfg contivconf.FamilyConfig, gw netip.Addr, id uint32) bool {
	if _, err := Dissect(cfg.PodSubnetCIDR.Masked(), cfg.PodSubnetOneNodePrefixLen, id); err != nil {
		return false
	}
	host, err := Dissect(cfg.VPPHostSubnetCIDR.Masked(), cfg.VPPHostSubnetOneNodePrefixLen, id)
	if err != nil || host.Bits() > host.Addr().BitLen()-2 {
		return false
	}
	if _, err := NodeAddress(cfg.VxlanCIDR.Masked(), id, netip.Addr{}); err != nil {
		return false
	}
	if cfg.NodeInterconnectCIDR.IsValid() {
		if _, err := NodeAddress(cfg.NodeInterconnectCIDR.Masked(), id, gw); err != nil {
			return false
		}
	}
	return true
}

// MaxNodeID returns the largest node ID that fits cfg (see NodeIDFits), 0
// when none does. The IDs that fit are exactly 1..MaxNodeID: every
// subnet a node gets fits the IDs from 1 up to a bound, so a binary
// search finds the smallest of those bounds (TestMaxNodeIDIsTheLastIDThatFits
// checks it against trying every ID). nodesync never claims an ID above it.
func MaxNodeID(cfg *contivconf.IPAMConfig, gw netip.Addr) uint32 {
	if !NodeIDFits(cfg, gw, 1) {
		return 0
	}
	lo, hi := uint64(1), uint64(math.MaxUint32)+1 // lo fits, hi does not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if NodeIDFits(cfg, gw, uint32(mid)) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return uint32(lo)
}
