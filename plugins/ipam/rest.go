package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
)

// REST paths of the IPAM plugin.
const (
	IPAMPath        = "/contiv/v1/ipam"
	AllocationsPath = "/contiv/v1/ipam/allocations"
	ConflictsPath   = "/contiv/v1/ipam/conflicts"
)

// NodeIPAMInfo is the reply of GET /contiv/v1/ipam (the JSON of Contiv's
// ipnet REST API, read by netctl and the UI).
//
// The fields above DualStack are the primary family's (ipamConfig), as
// in Contiv; DualStack is the second family of a dual-stack node
// (ipamConfig.dualStack), absent on a single-stack one.
type NodeIPAMInfo struct {
	NodeID            uint32                     `json:"nodeId"`
	NodeName          string                     `json:"nodeName"`
	NodeIP            string                     `json:"nodeIP"`
	PodSubnetThisNode string                     `json:"podSubnetThisNode"`
	VppHostNetwork    string                     `json:"vppHostNetwork"`
	DualStack         *FamilyInfo                `json:"dualStack,omitempty"`
	Config            *contivconf.IPAMConfigJSON `json:"config"`
	// AbsentPodReleases says whether the addresses of pods missing from
	// Kubernetes may be released now, and why not.
	AbsentPodReleases *AbsentPodReleases `json:"absentPodReleases,omitempty"`
}

// AbsentPodReleases is whether absence is evidence now (see
// keeper/evidence.go): Blocked says why not.
type AbsentPodReleases struct {
	Enabled bool   `json:"enabled"`
	Blocked string `json:"blocked,omitempty"`
}

// FamilyInfo is the addressing of this node in the second family of a
// dual-stack node, cut from the same node ID as the primary one.
type FamilyInfo struct {
	PodSubnetThisNode string `json:"podSubnetThisNode"`
	PodGatewayIP      string `json:"podGatewayIP"`
	NatLoopbackIP     string `json:"natLoopbackIP"`
	VppHostNetwork    string `json:"vppHostNetwork"`
	// NodeIP is the node-interconnect address, absent when
	// dualStack.nodeInterconnectCIDR is not set.
	NodeIP  string `json:"nodeIP,omitempty"`
	VxlanIP string `json:"vxlanIP"`
}

// PodAllocation is one allocation in GET /contiv/v1/ipam/allocations:
// the pod and its address, and for an attachment-keyed allocation the
// CNI attachment (network, container ID, interface name).
type PodAllocation struct {
	PodID  PodName `json:"PodID"`
	MainIP string  `json:"MainIP"`
	// IPs lists every address of a dual-stack allocation (MainIP first).
	IPs         []string `json:"IPs,omitempty"`
	Network     string   `json:"network,omitempty"`
	ContainerID string   `json:"containerId,omitempty"`
	IfName      string   `json:"ifName,omitempty"`
	// Owner and Seq name an owner-keyed allocation (the Cilium-style
	// API; PodID is then {owner, "_owner"}).
	Owner string `json:"owner,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
	// ReservationDeadline is set while the allocation awaits its
	// confirmation (RFC 3339): unconfirmed, it is released then.
	ReservationDeadline string `json:"reservationDeadline,omitempty"`
	// AllocatedAt is when the allocation was made (RFC 3339, UTC); absent
	// when unknown (a record of an agent that did not keep the time).
	AllocatedAt string `json:"allocatedAt,omitempty"`
}

// PodName names a pod in the REST replies.
type PodName = keeper.PodName

// Allocations is the reply of GET /contiv/v1/ipam/allocations (the JSON of
// Contiv's IPAM REST API; Pods is null when there are none).
type Allocations struct {
	Pods []PodAllocation `json:"Pods"`
}

// errNodeIP is Contiv's reply when the node IP cannot be computed.
var errNodeIP = errors.New("Error getting node IP")

func (p *Plugin) registerHandlers() {
	rest.RegisterDescribed(p.HTTP, IPAMPath,
		"this node's IPAM: node ID and name, node IP, pod subnet, VPP-host subnet, effective ipamConfig",
		p.ipamHandler, http.MethodGet)
	rest.RegisterDescribed(p.HTTP, AllocationsPath, "pod addresses allocated on this node",
		p.allocationsHandler, http.MethodGet)
	rest.RegisterDescribed(p.HTTP, ConflictsPath, "stored allocation records that lost a clash and were moved aside",
		p.conflictsHandler, http.MethodGet)
	rest.RegisterDescribed(p.HTTP, DumpPath,
		"every allocated address and its owner per family, the status one-liner and the debug status (Cilium's Dump, DebugStatus)",
		p.dumpHandler, http.MethodGet)
	p.registerOperatorHandlers()
	p.registerCheckpointHandlers()
	p.registerPoolsHandler()
	p.registerCandidatesHandler()
	p.registerStatusPage()
}

// Conflict is a record moved aside in GET /contiv/v1/ipam/conflicts.
type Conflict = keeper.Conflict

// Conflicts is the reply of GET /contiv/v1/ipam/conflicts.
type Conflicts struct {
	Conflicts []Conflict `json:"conflicts"`
}

func (p *Plugin) conflictsHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out := Conflicts{Conflicts: []Conflict{}}
		if p.LocalDB == nil {
			f.JSON(w, http.StatusOK, out)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), p.cfg.StoreTimeout)
		defer cancel()
		kvs, _, err := p.LocalDB.List(ctx, ConflictPrefix)
		if err != nil {
			f.Error(w, http.StatusInternalServerError, fmt.Errorf("reading %s: %w", ConflictPrefix, err))
			return
		}
		for _, kv := range kvs {
			out.Conflicts = append(out.Conflicts, keeper.DecodeConflict(kv.Key, kv.Value))
		}
		f.JSON(w, http.StatusOK, out)
	}
}

func (p *Plugin) ipamHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		st := p.st.Load()
		if st == nil {
			f.Error(w, http.StatusServiceUnavailable, p.notReady())
			return
		}
		if err := p.checkNodeID(); err != nil {
			f.Error(w, http.StatusServiceUnavailable, err)
			return
		}
		info := p.nodeInfo(st)
		if info.NodeIP == "" {
			f.Error(w, http.StatusInternalServerError, errNodeIP)
			return
		}
		why := p.keeper.Evidence()
		info.AbsentPodReleases = &AbsentPodReleases{Enabled: why == "", Blocked: why}
		f.JSON(w, http.StatusOK, info)
	}
}

// nodeInfo gathers GET /contiv/v1/ipam from one addressing state, so
// that every field is of the same resync.
func (p *Plugin) nodeInfo(st *addressing.State) NodeIPAMInfo {
	info := NodeIPAMInfo{
		NodeID:            st.NodeID,
		NodeName:          st.NodeName,
		PodSubnetThisNode: st.PodThis.String(),
		VppHostNetwork:    st.HostThis.String(),
		Config:            p.effectiveConfig(st),
	}
	if st.NodeIC.IsValid() {
		if ip, err := addressing.NodeAddress(st.NodeIC, st.NodeID, st.Gateway); err == nil {
			info.NodeIP = ip.String()
		}
	}
	if st.Second != nil {
		info.DualStack = familyInfo(st.Second, st.NodeID)
	}
	return info
}

// familyInfo is the addressing of node id in the second family f (the
// static default gateway is the primary family's: none is stepped over).
func familyInfo(f *addressing.FamilyState, id uint32) *FamilyInfo {
	fi := &FamilyInfo{
		PodSubnetThisNode: f.PodThis.String(),
		PodGatewayIP:      f.PodGW.String(),
		NatLoopbackIP:     f.NatLoop.String(),
		VppHostNetwork:    f.HostThis.String(),
	}
	if f.NodeIC.IsValid() {
		if ip, err := addressing.NodeAddress(f.NodeIC, id, netip.Addr{}); err == nil {
			fi.NodeIP = ip.String()
		}
	}
	if ip, err := addressing.NodeAddress(f.Vxlan, id, netip.Addr{}); err == nil {
		fi.VxlanIP = ip.String()
	}
	return fi
}

// effectiveConfig is the file's ipamConfig with the subnets and one-node
// prefix lengths in use in st (after the contivCIDR split, or the
// external pod CIDRs), in both families of a dual-stack node.
func (p *Plugin) effectiveConfig(st *addressing.State) *contivconf.IPAMConfigJSON {
	c := p.ContivConf.GetIPAMConfigForJSON()
	if c == nil {
		c = &contivconf.IPAMConfigJSON{}
	}
	c.PodSubnetCIDR, c.PodSubnetOneNodePrefixLen = st.PodAll.String(), st.PodThis.Bits()
	c.VPPHostSubnetCIDR, c.VPPHostSubnetOneNodePrefixLen = st.HostAll.String(), st.HostThis.Bits()
	c.VxlanCIDR, c.NodeInterconnectCIDR = st.Vxlan.String(), nodeICString(st.NodeIC)
	if f := st.Second; f != nil {
		if c.DualStack == nil {
			c.DualStack = &contivconf.FamilyJSON{}
		}
		d := c.DualStack // GetIPAMConfigForJSON's copy
		d.PodSubnetCIDR, d.PodSubnetOneNodePrefixLen = f.PodAll.String(), f.PodThis.Bits()
		d.VPPHostSubnetCIDR, d.VPPHostSubnetOneNodePrefixLen = f.HostAll.String(), f.HostThis.Bits()
		d.VxlanCIDR, d.NodeInterconnectCIDR = f.Vxlan.String(), nodeICString(f.NodeIC)
	}
	return c
}

// nodeICString is a node-interconnect subnet, "" when undefined.
func nodeICString(nodeIC netip.Prefix) string {
	if nodeIC.IsValid() {
		return nodeIC.String()
	}
	return ""
}

func (p *Plugin) allocationsHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		f.JSON(w, http.StatusOK, p.allocations())
	}
}

// allocations lists this node's allocations sorted by namespace, name
// and attachment.
func (p *Plugin) allocations() Allocations {
	var out Allocations
	for _, al := range p.keeper.Allocations() {
		pa := PodAllocation{PodID: PodName{Name: al.Pod.Name, Namespace: al.Pod.Namespace},
			MainIP: al.Addrs.First().String(), Network: al.Attachment.Network, ContainerID: al.Attachment.ContainerID,
			IfName: al.Attachment.IfName, Owner: al.Owner, Seq: al.Seq}
		if ips := al.Addrs.List(); len(ips) > 1 {
			for _, a := range ips {
				pa.IPs = append(pa.IPs, a.String())
			}
		}
		if !al.Deadline.IsZero() {
			pa.ReservationDeadline = al.Deadline.UTC().Format(time.RFC3339Nano)
		}
		if !al.Born.IsZero() {
			pa.AllocatedAt = al.Born.UTC().Format(time.RFC3339)
		}
		out.Pods = append(out.Pods, pa)
	}
	return out
}
