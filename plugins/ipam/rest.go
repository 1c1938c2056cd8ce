package ipam

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/contivconf"
)

// REST paths of the IPAM plugin.
const (
	IPAMPath        = "/contiv/v1/ipam"
	AllocationsPath = "/contiv/v1/ipam/allocations"
	ConflictsPath   = "/contiv/v1/ipam/conflicts"
)

// NodeIPAMInfo is the reply of GET /contiv/v1/ipam (the JSON of Contiv's
// ipnet REST API, read by netctl and the UI).
type NodeIPAMInfo struct {
	NodeID            uint32                     `json:"nodeId"`
	NodeName          string                     `json:"nodeName"`
	NodeIP            string                     `json:"nodeIP"`
	PodSubnetThisNode string                     `json:"podSubnetThisNode"`
	VppHostNetwork    string                     `json:"vppHostNetwork"`
	Config            *contivconf.IPAMConfigJSON `json:"config"`
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
}

// PodName names a pod in REST replies.
type PodName struct {
	Name      string `json:"Name"`
	Namespace string `json:"Namespace"`
}

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
}

// Conflict is a record moved aside in GET /contiv/v1/ipam/conflicts.
type Conflict struct {
	PodID       PodName `json:"PodID"`
	IP          string  `json:"ip"`
	KeptFor     string  `json:"keptFor"`
	At          string  `json:"at"`
	Network     string  `json:"network,omitempty"`
	ContainerID string  `json:"containerId,omitempty"`
	IfName      string  `json:"ifName,omitempty"`
}

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
			out.Conflicts = append(out.Conflicts, conflictOf(kv.Key, kv.Value))
		}
		f.JSON(w, http.StatusOK, out)
	}
}

// conflictOf decodes a record moved aside.
func conflictOf(key string, value []byte) Conflict {
	var v conflictValue
	if json.Unmarshal(value, &v) != nil {
		v.IP = "unreadable: " + string(value)
	}
	c := Conflict{IP: v.IP, KeptFor: v.KeptFor, At: v.At, Network: v.Network, ContainerID: v.ContainerID, IfName: v.IfName}
	if v.Pod != nil {
		c.PodID = *v.Pod
		return c
	}
	ns, name, _ := strings.Cut(strings.TrimPrefix(key, ConflictPrefix), "/")
	c.PodID = PodName{Name: name, Namespace: ns}
	return c
}

func (p *Plugin) ipamHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if !p.ready() {
			f.Error(w, http.StatusServiceUnavailable, p.notReady())
			return
		}
		if err := p.checkNodeID(); err != nil {
			f.Error(w, http.StatusServiceUnavailable, err)
			return
		}
		info := p.nodeInfo()
		if info.NodeIP == "" {
			f.Error(w, http.StatusInternalServerError, errNodeIP)
			return
		}
		f.JSON(w, http.StatusOK, info)
	}
}

// nodeInfo gathers GET /contiv/v1/ipam.
func (p *Plugin) nodeInfo() NodeIPAMInfo {
	var info NodeIPAMInfo
	p.read(func(st *state) {
		info = NodeIPAMInfo{
			NodeID:            st.nodeID,
			NodeName:          st.nodeName,
			PodSubnetThisNode: st.podThis.String(),
			VppHostNetwork:    st.hostThis.String(),
		}
	})
	if ip, _, err := p.NodeIPAddress(info.NodeID); err == nil {
		info.NodeIP = ip.String()
	}
	info.Config = p.effectiveConfig()
	return info
}

// effectiveConfig is the file's ipamConfig with the subnets and one-node
// prefix lengths in use (after the contivCIDR split, or the external pod
// CIDR).
func (p *Plugin) effectiveConfig() *contivconf.IPAMConfigJSON {
	c := p.ContivConf.GetIPAMConfigForJSON()
	if c == nil {
		c = &contivconf.IPAMConfigJSON{}
	}
	p.read(func(st *state) {
		c.PodSubnetCIDR = st.podAll.String()
		c.PodSubnetOneNodePrefixLen = st.podThis.Bits()
		c.VPPHostSubnetCIDR = st.hostAll.String()
		c.VPPHostSubnetOneNodePrefixLen = st.hostThis.Bits()
		c.VxlanCIDR = st.vxlan.String()
		c.NodeInterconnectCIDR = ""
		if st.nodeIC.IsValid() {
			c.NodeInterconnectCIDR = st.nodeIC.String()
		}
	})
	return c
}

func (p *Plugin) allocationsHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		f.JSON(w, http.StatusOK, p.allocations())
	}
}

// allocations lists this node's allocations sorted by namespace, name
// and attachment.
func (p *Plugin) allocations() Allocations {
	list := p.allocationList()
	slices.SortFunc(list, func(a, b allocation) int {
		return cmp.Or(comparePods(a.pod, b.pod), compareKeys(a.key, b.key))
	})
	var out Allocations
	for _, al := range list {
		pa := PodAllocation{PodID: PodName{Name: al.pod.Name, Namespace: al.pod.Namespace},
			MainIP: al.addrs.first().String(), Network: al.key.att.Network, ContainerID: al.key.att.ContainerID, IfName: al.key.att.IfName}
		if ips := al.addrs.list(); len(ips) > 1 {
			for _, a := range ips {
				pa.IPs = append(pa.IPs, a.String())
			}
		}
		if al.key.ownerKeyed() {
			pa.Owner, pa.Seq = al.key.pod.Name, al.key.seq
		}
		if al.resv != nil {
			pa.ReservationDeadline = al.resv.deadline.UTC().Format(time.RFC3339Nano)
		}
		out.Pods = append(out.Pods, pa)
	}
	return out
}
