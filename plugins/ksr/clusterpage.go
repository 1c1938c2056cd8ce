package ksr

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	mirrormodel "github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// REST paths of the cluster view.
const (
	// ClusterPath is the cluster page (HTML): every node's fill as a heat
	// map, the node IDs, the mirror's freshness. It is also GET / for
	// browsers when the REST server lets a plugin provide its index page.
	ClusterPath = "/contiv/v1/ksr/cluster"
	// NodesStatusPath is the cluster page's data as JSON (ClusterView).
	NodesStatusPath = "/contiv/v1/ksr/nodes-status"
)

// The states of a node on the cluster page.
const (
	// NodeFresh: the agent's status record is newer than three periods.
	NodeFresh = "fresh"
	// NodeStale: the record is older (the agent stopped publishing
	// without deleting it: crashed, or cut off from etcd).
	NodeStale = "stale"
	// NodeAbsent: the node holds an ID but has no record (its agent is
	// stopped, not started yet, or publishes no record).
	NodeAbsent = "absent"
	// NodeInvalid: the record does not decode (its error is shown).
	NodeInvalid = "invalid"
)

// ClusterView is the answer of GET NodesStatusPath and what the cluster
// page shows.
type ClusterView struct {
	// Now is when the view was taken (this replica's clock); ages count
	// from it.
	Now time.Time `json:"now"`
	// Identity is this replica; Leader the leading one ("" if none, or
	// unknown); Leading whether this replica leads.
	Identity string `json:"identity"`
	Leader   string `json:"leader"`
	Leading  bool   `json:"leading"`
	// Mirror is the mirror marker in etcd (nil: none).
	Mirror *MirrorView `json:"mirror"`
	// Records is the state of this replica's watch of the status records.
	Records RecordsView `json:"statusRecords"`
	// Nodes are every node with a node ID or a status record, by node ID
	// (nodes without an ID record last, by name).
	Nodes []NodeView `json:"nodes"`
	// Errors are the reads that failed (the view is partial then).
	Errors []string `json:"errors,omitempty"`
}

// MirrorView is the mirror marker and its freshness.
type MirrorView struct {
	mirrormodel.Marker
	// Revision is the marker key's etcd mod revision.
	Revision int64 `json:"revision"`
	// AgeSeconds is Now minus the heartbeat.
	AgeSeconds float64 `json:"ageSeconds"`
	// Stale: the heartbeat is older than three intervals (the agents then
	// take no absent pod as gone).
	Stale bool `json:"stale"`
}

// RecordsView is the state of the watch of agentstatus.Prefix.
type RecordsView struct {
	Synced   bool   `json:"synced"`
	Revision int64  `json:"revision"`
	Error    string `json:"error,omitempty"`
}

// NodeView is one node of the cluster view.
type NodeView struct {
	// ID is the node ID of its allocatedIDs record, else its status
	// record's (0: neither).
	ID   uint32 `json:"id"`
	Name string `json:"name"`
	// IPs are the addresses of its allocatedIDs record.
	IPs []string `json:"ips"`
	// State is NodeFresh, NodeStale, NodeAbsent or NodeInvalid.
	State string `json:"state"`
	// Ready, Used, Total (summed over the pools), Pods and the age are the
	// status record's (zero when absent or invalid).
	Ready      bool     `json:"ready"`
	Used       uint64   `json:"used"`
	Total      uint64   `json:"total"`
	AgeSeconds *float64 `json:"ageSeconds,omitempty"`
	// Status is the record itself (absent: none, or invalid).
	Status *agentstatus.Status `json:"status,omitempty"`
	// Error says why the record is invalid, or that the node has no
	// allocatedIDs record.
	Error string `json:"error,omitempty"`
}

// Fill is Used/Total (0 when Total is 0).
func (n *NodeView) Fill() float64 {
	if n.Total == 0 {
		return 0
	}
	return float64(n.Used) / float64(n.Total)
}

// clusterView reads the node IDs and the marker from etcd and joins them
// with the watched status records.
func (p *Plugin) clusterView(ctx context.Context) ClusterView {
	now := p.clock.Now()
	v := ClusterView{Now: now.UTC(), Identity: string(p.identity), Leading: p.status.get().Leading}
	if val, found, err := p.Election.Leader(ctx, p.cfg.ElectionPrefix); err != nil {
		v.Errors = append(v.Errors, fmt.Sprintf("leader: %v", err))
	} else if found {
		v.Leader = string(val)
	}
	if kv, found, err := p.DB.Get(ctx, markerKey); err != nil {
		v.Errors = append(v.Errors, fmt.Sprintf("mirror marker: %v", err))
	} else if found {
		m, err := mirrormodel.Parse(kv.Value)
		if err != nil {
			v.Errors = append(v.Errors, err.Error())
		} else {
			age := now.Sub(m.Heartbeat)
			v.Mirror = &MirrorView{Marker: m, Revision: kv.Revision, AgeSeconds: age.Seconds(), Stale: age > 3*m.Period()}
		}
	}
	records, rev, synced, watchErr := p.statuses.snapshot()
	v.Records = RecordsView{Synced: synced, Revision: rev, Error: watchErr}

	kvs, _, err := p.DB.List(ctx, codec.KSRPrefix+vppnode.KeyPrefix)
	if err != nil {
		v.Errors = append(v.Errors, fmt.Sprintf("node IDs: %v", err))
	}
	v.Nodes = make([]NodeView, 0, len(kvs)+len(records))
	byName := make(map[string]int, len(kvs)+len(records)) // index in v.Nodes
	p.page.nodeIDs(kvs, func(id uint32, rec nodeIDRecord) {
		if rec.name == "" {
			v.Errors = append(v.Errors, fmt.Sprintf("node ID %d: unreadable record", id))
			return
		}
		n := NodeView{ID: id, Name: rec.name, IPs: rec.ips, State: NodeAbsent}
		if i, dup := byName[n.Name]; dup { // two IDs for one name: the later key's shown
			v.Nodes[i] = n
			return
		}
		byName[n.Name] = len(v.Nodes)
		v.Nodes = append(v.Nodes, n)
	})
	for name, ws := range records {
		i, ok := byName[name]
		if !ok {
			i = len(v.Nodes)
			v.Nodes = append(v.Nodes, NodeView{Name: name, IPs: []string{}, Error: "no node ID record"})
		}
		describe(&v.Nodes[i], ws, now)
	}
	slices.SortFunc(v.Nodes, func(a, b NodeView) int {
		return cmp.Or(cmp.Compare(boolRank(a.ID == 0), boolRank(b.ID == 0)), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Name, b.Name))
	})
	return v
}

// boolRank orders false before true.
func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// describe sets n's state from its status record.
func describe(n *NodeView, ws watchedStatus, now time.Time) {
	if ws.Status == nil {
		n.State, n.Error = NodeInvalid, ws.Err
		return
	}
	st := ws.Status
	n.Status, n.Ready = st, st.Ready
	n.Used, n.Total = st.Fill()
	age := st.Age(now).Seconds()
	n.AgeSeconds = &age
	if n.ID == 0 {
		n.ID = st.NodeID
	}
	n.State = NodeFresh
	if st.Stale(now) {
		n.State = NodeStale
	}
}

// recordIPs are the addresses of a node ID record, the obsolete single
// one included.
func recordIPs(rec *vppnode.VppNode) []string {
	ips := slices.Clone(rec.GetIpAddresses())
	if a := rec.GetIpAddress(); a != "" && !slices.Contains(ips, a) {
		ips = append(ips, a)
	}
	if ips == nil {
		ips = []string{}
	}
	return ips
}

// registerClusterPage serves the cluster page, its JSON, and the page as
// the HTML index (GET /) where the REST server allows it.
func (p *Plugin) registerClusterPage() {
	rest.RegisterDescribed(p.HTTP, ClusterPath,
		"contiv-ksr: the cluster page (HTML): every node's fill as a heat map, node IDs, agents' status, mirror freshness",
		p.clusterPageHandler, http.MethodGet)
	rest.RegisterDescribed(p.HTTP, NodesStatusPath,
		"contiv-ksr: every node's ID, addresses and agent status record, and the mirror's freshness (the cluster page's data)",
		p.nodesStatusHandler, http.MethodGet)
	rest.SetIndexPage(p.HTTP, func(w http.ResponseWriter, r *http.Request, endpoints []rest.Endpoint) {
		p.writeClusterPage(w, r, endpoints)
	})
}

func (p *Plugin) nodesStatusHandler(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// JSONStream: the same bytes as f.JSON, without holding the
		// indented body (4.5 MB at 5,000 nodes).
		f.JSONStream(w, http.StatusOK, p.clusterView(r.Context()))
	}
}

func (p *Plugin) clusterPageHandler(*rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { p.writeClusterPage(w, r, nil) }
}

// writeClusterPage renders the page; endpoints (the index's) are listed
// under it. The page is built in one buffer, sized from the last page
// (about 650 bytes a node), and written with one Write.
func (p *Plugin) writeClusterPage(w http.ResponseWriter, r *http.Request, endpoints []rest.Endpoint) {
	v := p.clusterView(r.Context())
	var b bytes.Buffer
	b.Grow(p.page.sizeHint(len(v.Nodes)))
	if err := renderClusterPage(&b, v, endpoints); err != nil {
		p.Log.Error("cluster page", "error", err)
		http.Error(w, "cluster page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	p.page.lastSize.Store(int64(b.Len()))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// clusterPageState is what the cluster page's handlers keep between
// requests. Owner: the handlers, any number at once; nodes under mu,
// lastSize atomic. Its zero value is ready.
type clusterPageState struct {
	mu    sync.Mutex
	nodes map[string]nodeIDRecord // decoded node-ID records by etcd key
	// lastSize is the last page's length in bytes (0: none yet).
	lastSize atomic.Int64
}

// nodeIDRecord is one node-ID record as the page shows it, and the bytes
// it was decoded from.
type nodeIDRecord struct {
	value string   // the record's bytes
	name  string   // "": the record does not decode, or names no node
	ips   []string // recordIPs; shared by every view: never changed
}

// nodeIDs calls each with every node-ID record of kvs, in order (keys
// that are not a node ID's skipped). A record is decoded only when its
// bytes differ from those decoded last time (protojson costs most of a
// view at 5,000 nodes); records no longer listed are forgotten.
func (s *clusterPageState) nodeIDs(kvs []kvdb.KeyValue, each func(id uint32, rec nodeIDRecord)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.nodes
	s.nodes = make(map[string]nodeIDRecord, len(kvs))
	for _, kv := range kvs {
		id, err := vppnode.ParseKey(strings.TrimPrefix(kv.Key, codec.KSRPrefix))
		if err != nil {
			continue
		}
		rec, ok := prev[kv.Key]
		if !ok || rec.value != string(kv.Value) {
			rec = nodeIDRecord{value: string(kv.Value)}
			var m vppnode.VppNode
			if err := codec.Unmarshal(kv.Value, &m); err == nil && m.GetName() != "" {
				rec.name, rec.ips = m.GetName(), recordIPs(&m)
			}
		}
		s.nodes[kv.Key] = rec
		each(id, rec)
	}
}

// sizeHint is the buffer size for a page of n nodes: the last page's
// size and a little more, else an estimate.
func (s *clusterPageState) sizeHint(n int) int {
	if last := int(s.lastSize.Load()); last > 0 {
		return last + last/16
	}
	return 8<<10 + 700*n
}
