package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/engine/cidr"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
)

// The ipam view ("ipam [NODE]"): Contiv's netctl ipam, the node's
// addressing from GET ipamPath, with its pools (GET poolsPath), the
// reservations among its allocations (GET allocationsPath) and its
// release candidates (GET candidatesPath).

// poolsPath is ipam.PoolsPath (copied; a test checks that they agree).
const poolsPath = "/contiv/v1/ipam/pools"

// ipamInfo is what the view reads of ipam.NodeIPAMInfo.
type ipamInfo struct {
	NodeID            uint32      `json:"nodeId"`
	NodeName          string      `json:"nodeName"`
	NodeIP            string      `json:"nodeIP"`
	PodSubnetThisNode string      `json:"podSubnetThisNode"`
	VppHostNetwork    string      `json:"vppHostNetwork"`
	DualStack         *familyInfo `json:"dualStack,omitempty"`
	Config            *struct {
		UseExternalIPAM bool   `json:"useExternalIPAM,omitempty"`
		VxlanCIDR       string `json:"vxlanCIDR,omitempty"`
	} `json:"config"`
}

// familyInfo is ipam.FamilyInfo.
type familyInfo struct {
	PodSubnetThisNode string `json:"podSubnetThisNode"`
	PodGatewayIP      string `json:"podGatewayIP"`
	NatLoopbackIP     string `json:"natLoopbackIP"`
	VppHostNetwork    string `json:"vppHostNetwork"`
	NodeIP            string `json:"nodeIP,omitempty"`
	VxlanIP           string `json:"vxlanIP"`
}

// nodeStats is ipam.NodeStats, the reply of GET poolsPath.
type nodeStats struct {
	Pools          []poolStats `json:"pools"`
	Total          uint64      `json:"total"`
	Assigned       uint64      `json:"assigned"`
	Cooldown       uint64      `json:"cooldown"`
	Excluded       uint64      `json:"excluded"`
	Free           uint64      `json:"free"`
	Reservations   int         `json:"reservations"`
	CooldownReused uint64      `json:"cooldownReused"`
}

// poolStats is ipam.PoolStats.
type poolStats struct {
	CIDR     string `json:"cidr"`
	Family   string `json:"family"`
	Total    uint64 `json:"total"`
	Assigned uint64 `json:"assigned"`
	Cooldown uint64 `json:"cooldown"`
	Excluded uint64 `json:"excluded"`
	Free     uint64 `json:"free"`
	Revoked  bool   `json:"revoked,omitempty"`
}

// ipamView is -o json and yaml of the view (stable field names).
type ipamView struct {
	Server   string `json:"server"`
	NodeID   uint32 `json:"nodeId"`
	NodeName string `json:"nodeName"`
	// Families is the node's addressing per family, the primary first.
	Families []familyView `json:"families"`
	Pools    []poolView   `json:"pools"`
	// Totals are the sums of the pools' counts.
	Totals            poolTotals        `json:"totals"`
	Reservations      []reservationView `json:"reservations"`
	ReleaseCandidates candidateList     `json:"releaseCandidates"`
}

// familyView is the node's addressing in one family. PodGateway,
// NatLoopback and VxlanIP of the primary family are derived by
// contiv-netctl as the agent derives them (host 1 of the pod subnet, the
// address before its last, host NODE-ID of the VXLAN CIDR).
type familyView struct {
	Family         string `json:"family"`
	PodSubnet      string `json:"podSubnet"`
	PodGateway     string `json:"podGateway"`
	NatLoopback    string `json:"natLoopback"`
	VppHostNetwork string `json:"vppHostNetwork"`
	VxlanIP        string `json:"vxlanIP"`
	NodeIP         string `json:"nodeIP"`
}

// poolView is one pool: its counts, Used (total - free) and its fill in
// whole percent.
type poolView struct {
	poolStats
	Used        uint64 `json:"used"`
	FillPercent uint64 `json:"fillPercent"`
}

// poolTotals are nodeStats without the pools.
type poolTotals struct {
	Total          uint64 `json:"total"`
	Assigned       uint64 `json:"assigned"`
	Cooldown       uint64 `json:"cooldown"`
	Excluded       uint64 `json:"excluded"`
	Free           uint64 `json:"free"`
	Reservations   int    `json:"reservations"`
	CooldownReused uint64 `json:"cooldownReused"`
}

// reservationView is an allocation awaiting its confirmation.
type reservationView struct {
	Owner    string   `json:"owner"`
	Seq      uint64   `json:"seq,omitempty"`
	IPs      []string `json:"ips"`
	Deadline string   `json:"deadline"`
}

func showUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] ipam [-o table|wide|json|yaml] [NODE]

Show a node's IPAM as Contiv's netctl ipam does: node ID and name, node IP, pod subnet(s),
pod gateway, NAT loopback, VPP-host network, VXLAN IP (GET /contiv/v1/ipam); its pools with
fill bars, cooldowns (GET /contiv/v1/ipam/pools); the reservations awaiting confirmation
(GET /contiv/v1/ipam/allocations) and the release candidates (GET
/contiv/v1/ipam/release-candidates).

Without NODE, the agent at -server; with NODE, that node's agent, whose REST server its
status record in etcd (-etcd) names. A node named like an ipam command: ipam -- NODE.

Fill bars: [#######.....] 58% 148/254 is 148 of the pool's 254 addresses in use (assigned,
cooling down or excluded); coloured green below 70%, yellow below 90%, red from 90%. wide adds
each pool's assigned, excluded and free counts.

`)
	printDefaults(w, showFlags(new(string)))
	_, _ = fmt.Fprint(w, `
"contiv-netctl ipam -h" lists the ipam commands, "contiv-netctl -h" the global flags.
`)
}

func showFlags(format *string) *flag.FlagSet {
	fs := flag.NewFlagSet("ipam", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(format, "o", formatTable, "output `format`: table, wide, json or yaml")
	return fs
}

// parseInterspersed parses args into fs, flags before and after the
// arguments ("NODE -o json"); it returns the arguments.
func parseInterspersed(fs *flag.FlagSet, args []string, usage func(io.Writer)) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args, usage); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// After "--" everything is an argument.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// showCommand runs "ipam [NODE]".
func showCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	var format string
	fs := showFlags(&format)
	pos, err := parseInterspersed(fs, args, showUsage)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return &usageError{msg: fmt.Sprintf("ipam: %d arguments %q: want at most one NODE", len(pos), pos), usage: showUsage}
	}
	if err := checkFormat("ipam", format, []string{formatTable, formatWide, formatJSON, formatYAML}, showUsage); err != nil {
		return err
	}
	var c *client
	if len(pos) == 0 {
		if c, err = newClient(g, showUsage); err != nil {
			return err
		}
	} else if c, err = nodeClient(ctx, g, pos[0], cio); err != nil {
		return err
	}
	v, err := readIPAM(ctx, c)
	if err != nil {
		return fmt.Errorf("ipam: %w", err)
	}
	v.Server = c.url("", nil)
	switch format {
	case formatJSON, formatYAML:
		return writeData(cio.stdout, format, v)
	}
	return printIPAM(cio.stdout, v, format == formatWide, newPainter(g, cio), cio.now())
}

// nodeClient is the client of node's agent, from its status record; a
// stale record is a warning.
func nodeClient(ctx context.Context, g *globals, name string, cio *cmdIO) (*client, error) {
	if _, err := newClient(g, showUsage); err != nil { // the credentials and TLS flags
		return nil, err
	}
	e, err := newEtcd(g, showUsage)
	if err != nil {
		return nil, err
	}
	defer e.close()
	ctx2, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	got, err := e.cli.Get(ctx2, agentstatus.Key(name))
	if err != nil {
		return nil, fmt.Errorf("ipam %s: %w", name, e.fail(ctx2, "reading "+agentstatus.Key(name), err))
	}
	if len(got.Kvs) == 0 {
		return nil, fmt.Errorf("ipam %s: no agent status record %s in etcd %s (\"contiv-netctl nodes\" lists the nodes; "+
			"the ipam commands: %s)", name, agentstatus.Key(name), strings.Join(e.endpoints, ","), strings.Join(ipamCommands, ", "))
	}
	st, err := agentstatus.Decode(got.Kvs[0].Value)
	if err != nil {
		return nil, fmt.Errorf("ipam %s: agent status %s: %w", name, agentstatus.Key(name), err)
	}
	if st.REST == "" {
		return nil, fmt.Errorf("ipam %s: the agent status record %s names no REST server", name, agentstatus.Key(name))
	}
	now := cio.now()
	if st.Stale(now) {
		_, _ = fmt.Fprintf(cio.stderr, "contiv-netctl: warning: node %s: its status record is stale (updated %s ago); asking %s anyway\n",
			name, age(now, st.Updated), st.REST)
	}
	return newClientAt(g, st.REST, "the status record of node "+name, showUsage)
}

// getJSON is GET path decoded into v.
func getJSON(ctx context.Context, c *client, path string, v any) error {
	body, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return withReasonHint(err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: the reply %q: %w", c.url(path, nil), cut(string(body)), err)
	}
	return nil
}

// readIPAM reads the view from the agent of c.
func readIPAM(ctx context.Context, c *client) (*ipamView, error) {
	var info ipamInfo
	var stats nodeStats
	var allocs allocationList
	var cands candidateList
	for _, call := range []struct {
		path string
		v    any
	}{{ipamPath, &info}, {poolsPath, &stats}, {allocationsPath, &allocs}, {candidatesPath, &cands}} {
		if err := getJSON(ctx, c, call.path, call.v); err != nil {
			return nil, err
		}
	}
	v := &ipamView{NodeID: info.NodeID, NodeName: info.NodeName, Families: []familyView{primaryFamily(&info)},
		Pools: []poolView{}, Reservations: []reservationView{}, ReleaseCandidates: cands,
		Totals: poolTotals{Total: stats.Total, Assigned: stats.Assigned, Cooldown: stats.Cooldown, Excluded: stats.Excluded,
			Free: stats.Free, Reservations: stats.Reservations, CooldownReused: stats.CooldownReused}}
	if v.ReleaseCandidates.Candidates == nil {
		v.ReleaseCandidates.Candidates = []candidate{}
	}
	if d := info.DualStack; d != nil {
		v.Families = append(v.Families, familyView{Family: familyName(d.PodSubnetThisNode), PodSubnet: d.PodSubnetThisNode,
			PodGateway: d.PodGatewayIP, NatLoopback: d.NatLoopbackIP, VppHostNetwork: d.VppHostNetwork, VxlanIP: d.VxlanIP, NodeIP: d.NodeIP})
	}
	for _, p := range stats.Pools {
		used := p.Total - min(p.Free, p.Total)
		v.Pools = append(v.Pools, poolView{poolStats: p, Used: used, FillPercent: percent(used, p.Total)})
	}
	for _, a := range allocs.Pods {
		if a.ReservationDeadline == "" {
			continue
		}
		owner := a.Owner
		if owner == "" {
			owner = a.PodID.Namespace + "/" + a.PodID.Name
		}
		v.Reservations = append(v.Reservations, reservationView{Owner: owner, Seq: a.Seq, IPs: a.addresses(), Deadline: a.ReservationDeadline})
	}
	return v, nil
}

// primaryFamily is the primary family's addressing of info, with the
// gateway, NAT loopback and VXLAN address derived as the agent derives
// them ("" where a value does not parse).
func primaryFamily(info *ipamInfo) familyView {
	f := familyView{Family: familyName(info.PodSubnetThisNode), PodSubnet: info.PodSubnetThisNode,
		VppHostNetwork: info.VppHostNetwork, NodeIP: info.NodeIP}
	if p, err := netip.ParsePrefix(info.PodSubnetThisNode); err == nil {
		if gw, err := cidr.Addr(p.Masked(), 1); err == nil {
			f.PodGateway = gw.String()
		}
		if last := cidr.Last(p.Masked()); last.IsValid() {
			f.NatLoopback = last.Prev().String()
		}
	}
	if info.Config != nil && info.NodeID != 0 {
		if p, err := netip.ParsePrefix(info.Config.VxlanCIDR); err == nil {
			if ip, err := cidr.Addr(p.Masked(), uint64(info.NodeID)); err == nil {
				f.VxlanIP = ip.String()
			}
		}
	}
	return f
}

// familyName is ipv4 or ipv6, the family of prefix ("" if it does not
// parse).
func familyName(prefix string) string {
	p, err := netip.ParsePrefix(prefix)
	switch {
	case err != nil:
		return ""
	case p.Addr().Is4():
		return "ipv4"
	}
	return "ipv6"
}

// printIPAM prints the view as text.
func printIPAM(w io.Writer, v *ipamView, wide bool, p painter, now time.Time) error {
	tw := newTable(w)
	values := func(get func(f familyView) string) string {
		var out []string
		for _, f := range v.Families {
			out = append(out, cell(get(f)))
		}
		return strings.Join(out, ", ")
	}
	row(tw, "Node ID:", fmt.Sprint(v.NodeID))
	row(tw, "Node name:", cell(v.NodeName))
	row(tw, "Node IP:", values(func(f familyView) string { return f.NodeIP }))
	row(tw, "Pod subnet this node:", values(func(f familyView) string { return f.PodSubnet }))
	row(tw, "Pod gateway IP:", values(func(f familyView) string { return f.PodGateway }))
	row(tw, "NAT loopback IP:", values(func(f familyView) string { return f.NatLoopback }))
	row(tw, "VPP-host network:", values(func(f familyView) string { return f.VppHostNetwork }))
	row(tw, "VXLAN IP:", values(func(f familyView) string { return f.VxlanIP }))
	row(tw, "Agent:", v.Server)
	if err := tw.Flush(); err != nil {
		return err
	}

	_, _ = fmt.Fprintln(w)
	t := v.Totals
	_, _ = fmt.Fprintf(w, "Pools: %d addresses, %d assigned, %d cooling down, %d excluded, %d free; %d reservation(s)\n",
		t.Total, t.Assigned, t.Cooldown, t.Excluded, t.Free, t.Reservations)
	tw = newTable(w)
	head := []string{"POOL", "FAMILY", p.paint(colorDefault, "FILL"), "COOLDOWN"}
	if wide {
		head = append(head, "ASSIGNED", "EXCLUDED", "FREE")
	}
	row(tw, head...)
	for _, pl := range v.Pools {
		name := cell(pl.CIDR)
		if pl.Revoked {
			name += " (revoked)"
		}
		cells := []string{name, cell(pl.Family), p.paint(fillColor(pl.Used, pl.Total), fillBar(pl.Used, pl.Total)), fmt.Sprint(pl.Cooldown)}
		if wide {
			cells = append(cells, fmt.Sprint(pl.Assigned), fmt.Sprint(pl.Excluded), fmt.Sprint(pl.Free))
		}
		row(tw, cells...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	_, _ = fmt.Fprintln(w)
	if len(v.Reservations) == 0 {
		_, _ = fmt.Fprintln(w, "Reservations: none")
	} else {
		_, _ = fmt.Fprintf(w, "Reservations: %d awaiting confirmation\n", len(v.Reservations))
		tw = newTable(w)
		row(tw, "OWNER", "IPS", "EXPIRES")
		for _, r := range v.Reservations {
			row(tw, cell(r.Owner), joinOr(r.IPs), relTime(now, r.Deadline))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	_, _ = fmt.Fprintln(w)
	rc := v.ReleaseCandidates
	state := "running"
	switch {
	case !rc.Running && rc.Blocked != "":
		state = p.paint(colorYellow, "paused: "+cell(rc.Blocked))
	case !rc.Running:
		state = p.paint(colorYellow, "paused")
	}
	_, _ = fmt.Fprintf(w, "Release candidates: %d (grace period %s, %s)\n", len(rc.Candidates), cell(rc.GracePeriod), state)
	if len(rc.Candidates) > 0 {
		tw = newTable(w)
		row(tw, "POD", "IPS", "MISSING", "RELEASE")
		for _, cd := range rc.Candidates {
			rel := relTime(now, cd.ReleaseAt)
			if cd.SandboxLives {
				rel += " (kept: its sandbox lives)"
			}
			row(tw, cell(cd.Pod), joinOr(cd.IPs), relTime(now, cd.MissingSince), rel)
		}
		return tw.Flush()
	}
	return nil
}

// relTime is an RFC 3339 time relative to now ("5m ago", "in 2m"), or
// the text as it is when it does not parse.
func relTime(now time.Time, s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return cell(s)
	}
	if t.After(now) {
		return age(now, t)
	}
	return age(now, t) + " ago"
}
