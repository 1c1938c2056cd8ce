package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// The nodes command: every node of the cluster as etcd knows it, from
// one transaction of prefix reads and the presence leases' TTLs.

// nodeView is one node of "nodes" (-o json and yaml: these field names
// are the documented, stable output).
type nodeView struct {
	// ID is the node ID the node's agent holds (0: none claimed).
	ID   uint32 `json:"id"`
	Name string `json:"name"`
	// NodeIPs are the node's interconnect addresses ("ip/prefix") of its
	// node-ID record.
	NodeIPs []string `json:"nodeIPs"`
	// HostIPs are the Kubernetes Node's InternalIP and ExternalIP
	// addresses.
	HostIPs []string `json:"hostIPs"`
	// InKubernetes: contiv-ksr mirrors a Kubernetes Node of this name.
	InKubernetes bool `json:"inKubernetes"`
	// PodCIDRs are the Node's spec.podCIDRs; Blocks the pod address
	// blocks granted to it (elastic pools).
	PodCIDRs []string `json:"podCIDRs"`
	Blocks   []string `json:"blocks"`
	// Agent is the agent's state from its status record: ready,
	// not-ready, stale (not updated for three periods: it may be gone) or
	// absent (no record).
	Agent  string      `json:"agent"`
	Status *statusView `json:"status"`
	Lease  leaseView   `json:"lease"`
}

// The agent states.
const (
	agentReady    = "ready"
	agentNotReady = "not-ready"
	agentStale    = "stale"
	agentAbsent   = "absent"
)

// statusView is the agent's status record.
type statusView struct {
	REST              string     `json:"rest"`
	Ready             bool       `json:"ready"`
	Stale             bool       `json:"stale"`
	Pods              int        `json:"pods"`
	PodCapacity       uint64     `json:"podCapacity"`
	ReleaseCandidates int        `json:"releaseCandidates"`
	Pools             []poolFill `json:"pools"`
	Updated           time.Time  `json:"updated"`
	PeriodSeconds     int        `json:"periodSeconds"`
}

// poolFill is one pool of a status record.
type poolFill struct {
	Name   string `json:"name"`
	Family int    `json:"family"`
	Prefix string `json:"prefix"`
	Used   uint64 `json:"used"`
	Total  uint64 `json:"total"`
}

// leaseView is the agent's presence key: present, and the remaining TTL
// of its lease in seconds (-1: expired, being revoked; absent when the
// key has no lease).
type leaseView struct {
	Present    bool   `json:"present"`
	TTLSeconds *int64 `json:"ttlSeconds,omitempty"`
}

func nodesUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] nodes [-o table|wide|json|yaml|name]

List every node of the cluster as etcd (-etcd) knows it: the node-ID records of the agents,
the Kubernetes Nodes contiv-ksr mirrors, the pool blocks granted, the agents' presence keys
and status records. All are read in one transaction; then the remaining TTL of each presence
lease.

Columns: ID (the node ID, - for none), NAME, NODE-IPS (interconnect addresses of the node-ID
record, else the Node's addresses), POD-CIDRS (spec.podCIDRs of the Node, else the subnets
of the agent's pools; "+N blocks" granted), PODS (pod allocations / pod capacity, from the
status record), AGENT (ready, not-ready, stale AGE: not updated for three periods, or absent),
LEASE (the presence lease's remaining TTL, or absent). wide adds HOST-IPS, BLOCKS,
CANDIDATES (release candidates), UPDATED and REST. name prints the node names only.

`)
	printDefaults(w, nodesFlags(new(string)))
	_, _ = fmt.Fprint(w, `
"contiv-netctl -h" lists the global flags.
`)
}

func nodesFlags(format *string) *flag.FlagSet {
	fs := flag.NewFlagSet("nodes", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(format, "o", formatTable, "output `format`: table, wide, json, yaml or name")
	return fs
}

// nodesCommand runs "nodes".
func nodesCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	var format string
	fs := nodesFlags(&format)
	if err := parseFlags(fs, args, nodesUsage); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("nodes: unexpected argument %q", fs.Arg(0)), usage: nodesUsage}
	}
	if err := checkFormat("nodes", format, []string{formatTable, formatWide, formatJSON, formatYAML, formatName}, nodesUsage); err != nil {
		return err
	}
	e, err := newEtcd(g, nodesUsage)
	if err != nil {
		return err
	}
	defer e.close()
	snap, err := e.readCluster(ctx)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	views, warnings := buildNodes(snap, cio.now())
	for _, w := range warnings {
		_, _ = fmt.Fprintf(cio.stderr, "contiv-netctl: warning: %s\n", w)
	}
	switch format {
	case formatJSON, formatYAML:
		if views == nil {
			views = []nodeView{}
		}
		return writeData(cio.stdout, format, map[string]any{"nodes": views})
	case formatName:
		for _, v := range views {
			_, _ = fmt.Fprintln(cio.stdout, v.Name)
		}
		return nil
	}
	if len(views) == 0 {
		_, _ = fmt.Fprintf(cio.stdout, "no nodes: etcd %s holds no node-ID record, Node, presence key or agent status\n", strings.Join(e.endpoints, ","))
		return nil
	}
	return printNodes(cio.stdout, views, format == formatWide, newPainter(g, cio), cio.now())
}

// buildNodes joins the records of snap by node name, sorted by node ID
// (nodes without one last) and name. A record that does not decode is
// left out with a warning naming its key.
func buildNodes(snap *snapshot, now time.Time) ([]nodeView, []string) {
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	byName := map[string]*nodeView{}
	get := func(name string) *nodeView {
		v := byName[name]
		if v == nil {
			v = &nodeView{Name: name, NodeIPs: []string{}, HostIPs: []string{}, PodCIDRs: []string{}, Blocks: []string{}, Agent: agentAbsent}
			byName[name] = v
		}
		return v
	}
	for _, kv := range snap.ids {
		key := string(kv.Key)
		id, err := vppnode.ParseKey(strings.TrimPrefix(key, codec.KSRPrefix))
		if err != nil {
			warn("%v", err)
			continue
		}
		var rec vppnode.VppNode
		if err := codec.Unmarshal(kv.Value, &rec); err != nil || rec.GetName() == "" {
			warn("node-ID record %s: %v", key, orNoName(err))
			continue
		}
		v := get(rec.GetName())
		if v.ID != 0 && v.ID != id {
			warn("node %q holds node IDs %d and %d (%s)", rec.GetName(), v.ID, id, key)
			id = min(id, v.ID)
		}
		v.ID = id
		ips := rec.GetIpAddresses()
		if len(ips) == 0 && rec.GetIpAddress() != "" {
			ips = []string{rec.GetIpAddress()}
		}
		v.NodeIPs = append(v.NodeIPs, ips...)
	}
	for _, kv := range snap.nodes {
		key := string(kv.Key)
		name, err := node.ParseKey(strings.TrimPrefix(key, codec.KSRPrefix))
		if err != nil {
			warn("%v", err)
			continue
		}
		var rec node.Node
		if err := codec.Unmarshal(kv.Value, &rec); err != nil {
			warn("Node record %s: %v", key, err)
			continue
		}
		v := get(name)
		v.InKubernetes = true
		v.PodCIDRs = append(v.PodCIDRs, rec.GetPod_CIDRs()...)
		if len(v.PodCIDRs) == 0 && rec.GetPod_CIDR() != "" {
			v.PodCIDRs = append(v.PodCIDRs, rec.GetPod_CIDR())
		}
		for _, a := range rec.GetAddresses() {
			switch a.GetType() {
			case node.NodeAddress_NodeInternalIP, node.NodeAddress_NodeExternalIP:
				v.HostIPs = append(v.HostIPs, a.GetAddress())
			}
		}
	}
	for _, kv := range snap.grants {
		key := string(kv.Key)
		name := strings.TrimPrefix(key, grantPrefix)
		gr, err := poolblock.ParseGrant(kv.Value)
		if err != nil || name == "" || strings.Contains(name, "/") {
			warn("pool grant %s: %v", key, orNoName(err))
			continue
		}
		v := get(name)
		for _, b := range gr.Blocks {
			v.Blocks = append(v.Blocks, b.String())
		}
	}
	for _, kv := range snap.presence {
		name := strings.TrimPrefix(string(kv.Key), presencePrefix)
		if name == "" || strings.Contains(name, "/") {
			warn("presence key %s: not %s<node name>", kv.Key, presencePrefix)
			continue
		}
		v := get(name)
		v.Lease.Present = true
		if kv.Lease != 0 {
			if ttl, ok := snap.ttl[clientv3.LeaseID(kv.Lease)]; ok {
				v.Lease.TTLSeconds = &ttl
			}
		}
	}
	for _, kv := range snap.status {
		key := string(kv.Key)
		name, err := agentstatus.ParseKey(key)
		if err != nil {
			warn("%v", err)
			continue
		}
		st, err := agentstatus.Decode(kv.Value)
		if err != nil {
			warn("agent status %s: %v", key, err)
			continue
		}
		v := get(name)
		v.Status = newStatusView(st, now)
		v.Agent = agentState(st, now)
		if v.ID == 0 {
			v.ID = st.NodeID
		}
	}
	out := make([]nodeView, 0, len(byName))
	for _, v := range byName {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b nodeView) int {
		switch {
		case a.ID == 0 && b.ID != 0:
			return 1
		case a.ID != 0 && b.ID == 0:
			return -1
		}
		return cmp.Or(cmp.Compare(a.ID, b.ID), strings.Compare(a.Name, b.Name))
	})
	return out, warnings
}

// orNoName is err, or the error of a record without a node name.
func orNoName(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("names no node")
}

// agentState is ready, not-ready or stale: a stale record is never
// ready.
func agentState(st *agentstatus.Status, now time.Time) string {
	switch {
	case st.Stale(now):
		return agentStale
	case st.Ready:
		return agentReady
	}
	return agentNotReady
}

// newStatusView is the view of a status record. PodCapacity is the
// smallest family's sum of pool totals (a dual-stack pod takes one
// address of each family).
func newStatusView(st *agentstatus.Status, now time.Time) *statusView {
	sv := &statusView{REST: st.REST, Ready: st.Ready, Stale: st.Stale(now), Pods: st.Pods, ReleaseCandidates: st.ReleaseCandidates,
		Pools: []poolFill{}, Updated: st.Updated, PeriodSeconds: st.PeriodSeconds}
	totals := map[int]uint64{}
	for _, p := range st.Pools {
		sv.Pools = append(sv.Pools, poolFill(p))
		totals[p.Family] += p.Total
	}
	first := true
	for _, t := range totals {
		if first || t < sv.PodCapacity {
			sv.PodCapacity, first = t, false
		}
	}
	return sv
}

// printNodes prints views as a table.
func printNodes(w io.Writer, views []nodeView, wide bool, p painter, now time.Time) error {
	tw := newTable(w)
	head := []string{"ID", "NAME", "NODE-IPS", "POD-CIDRS", "PODS", p.paint(colorDefault, "AGENT"), "LEASE"}
	if wide {
		head = append(head, "HOST-IPS", "BLOCKS", "CANDIDATES", "UPDATED", "REST")
	}
	row(tw, head...)
	for _, v := range views {
		id := "-"
		if v.ID != 0 {
			id = fmt.Sprint(v.ID)
		}
		ips := v.NodeIPs
		if len(ips) == 0 {
			ips = v.HostIPs
		}
		cidrs := v.PodCIDRs
		pods, cands, updated, rest := "-", "-", "-", "-"
		if st := v.Status; st != nil {
			if len(cidrs) == 0 {
				for _, pl := range st.Pools {
					cidrs = append(cidrs, pl.Prefix)
				}
			}
			pods = fmt.Sprintf("%d/%d", st.Pods, st.PodCapacity)
			cands = fmt.Sprint(st.ReleaseCandidates)
			updated = age(now, st.Updated)
			rest = cell(st.REST)
		}
		cidrCell := joinOr(cidrs)
		if n := len(v.Blocks); n > 0 && !wide {
			cidrCell += fmt.Sprintf(" +%d blocks", n)
		}
		cells := []string{id, cell(v.Name), joinOr(ips), cidrCell, pods, agentCell(p, v, now), leaseCell(v.Lease)}
		if wide {
			cells = append(cells, joinOr(v.HostIPs), joinOr(v.Blocks), cands, updated, rest)
		}
		row(tw, cells...)
	}
	return tw.Flush()
}

// agentCell is the AGENT cell: ready green, not-ready red, stale (with
// its age) yellow, absent plain.
func agentCell(p painter, v nodeView, now time.Time) string {
	switch v.Agent {
	case agentReady:
		return p.paint(colorGreen, agentReady)
	case agentNotReady:
		return p.paint(colorRed, agentNotReady)
	case agentStale:
		return p.paint(colorYellow, agentStale+" "+age(now, v.Status.Updated))
	}
	return p.paint(colorDefault, v.Agent)
}

// leaseCell is the LEASE cell: the remaining TTL, "expired", "no lease"
// (a key without one) or "absent".
func leaseCell(l leaseView) string {
	switch {
	case !l.Present:
		return "absent"
	case l.TTLSeconds == nil:
		return "no lease"
	case *l.TTLSeconds < 0:
		return "expired"
	}
	return shortDuration(time.Duration(*l.TTLSeconds) * time.Second)
}
