package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

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

// PodAllocation is one pod's address in GET /contiv/v1/ipam/allocations.
type PodAllocation struct {
	PodID  PodName `json:"PodID"`
	MainIP string  `json:"MainIP"`
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
	PodID   PodName `json:"PodID"`
	IP      string  `json:"ip"`
	KeptFor string  `json:"keptFor"`
	At      string  `json:"at"`
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
			c := Conflict{}
			if json.Unmarshal(kv.Value, &c) != nil {
				c.IP = "unreadable: " + string(kv.Value)
			}
			ns, name, _ := strings.Cut(strings.TrimPrefix(kv.Key, ConflictPrefix), "/")
			c.PodID = PodName{Name: name, Namespace: ns}
			out.Conflicts = append(out.Conflicts, c)
		}
		f.JSON(w, http.StatusOK, out)
	}
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

// allocations lists this node's pod addresses sorted by namespace and name.
func (p *Plugin) allocations() Allocations {
	var out Allocations
	for id, a := range p.podAddrs() {
		out.Pods = append(out.Pods, PodAllocation{PodID: PodName{Name: id.Name, Namespace: id.Namespace}, MainIP: a.String()})
	}
	sort.Slice(out.Pods, func(i, j int) bool {
		a, b := out.Pods[i].PodID, out.Pods[j].PodID
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}
