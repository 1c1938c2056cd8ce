package addressing

import (
	"net/netip"
	"strings"

	"github.com/contiv-ipam/agent/plugins/contivconf"
)

// State is the addressing derived at a resync; it is never modified
// after it is published.
type State struct {
	NodeID   uint32
	NodeName string
	Cfg      *contivconf.IPAMConfig
	Gateway  netip.Addr // static default gateway, excluded from node IPs

	FamilyState // the primary family (ipamConfig)
	// Second is the second family of a dual-stack node
	// (ipamConfig.dualStack), cut from the same node ID; nil when
	// single-stack.
	Second *FamilyState
}

// FamilyState is the addressing of one address family.
type FamilyState struct {
	PodAll, PodThis   netip.Prefix
	PodGW, NatLoop    netip.Addr
	HostAll, HostThis netip.Prefix
	HostVPP, HostLnx  netip.Addr
	NodeIC, Vxlan     netip.Prefix // nodeIC invalid when undefined
	Service           netip.Prefix
	// VxlanIP and NodeIP are this node's VXLAN and node-interconnect
	// addresses, set for the second family only (NodeIP invalid when
	// its nodeInterconnectCIDR is undefined).
	VxlanIP, NodeIP netip.Addr
}

// Families lists the node's Families: the primary, then the second.
func (st *State) Families() []*FamilyState {
	if st.Second == nil {
		return []*FamilyState{&st.FamilyState}
	}
	return []*FamilyState{&st.FamilyState, st.Second}
}

// SlotOf is the slot (0 primary, 1 second) of a's family; false when the
// node has no pod subnet of that family.
func (st *State) SlotOf(a netip.Addr) (int, bool) {
	for i, f := range st.Families() {
		if f.PodThis.Addr().Is4() == a.Unmap().Is4() {
			return i, true
		}
	}
	return 0, false
}

// PodSubnets are the pod subnets in use, by slot.
func (st *State) PodSubnets() PodCIDRs {
	var out PodCIDRs
	for i, f := range st.Families() {
		out[i] = f.PodThis
	}
	return out
}

// DescribeCIDRs lists the valid prefixes, comma-separated.
func DescribeCIDRs(ps PodCIDRs) string {
	var out []string
	for _, p := range ps {
		if p.IsValid() {
			out = append(out, p.String())
		}
	}
	return strings.Join(out, ",")
}
