package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
)

// The pods command: the pod allocations of every agent (GET
// allocationsPath of each, concurrently), or of one node's agent.

// allocationsPath is ipam.AllocationsPath (copied; a test checks that
// they agree).
const allocationsPath = "/contiv/v1/ipam/allocations"

// agentLimit bounds the agents asked at once.
const agentLimit = 16

// allocationList is ipam.Allocations, the reply of GET allocationsPath.
type allocationList struct {
	Pods []allocation `json:"Pods"`
}

// allocation is ipam.PodAllocation. AllocatedAt (RFC 3339) is absent
// for a record stored without the time, and from older agents: AGE is
// "-" then.
type allocation struct {
	PodID struct {
		Name      string `json:"Name"`
		Namespace string `json:"Namespace"`
	} `json:"PodID"`
	MainIP              string   `json:"MainIP"`
	IPs                 []string `json:"IPs,omitempty"`
	Network             string   `json:"network,omitempty"`
	ContainerID         string   `json:"containerId,omitempty"`
	IfName              string   `json:"ifName,omitempty"`
	Owner               string   `json:"owner,omitempty"`
	Seq                 uint64   `json:"seq,omitempty"`
	ReservationDeadline string   `json:"reservationDeadline,omitempty"`
	AllocatedAt         string   `json:"allocatedAt,omitempty"`
}

// addresses are every address of the allocation (MainIP first).
func (a *allocation) addresses() []string {
	if len(a.IPs) > 0 {
		return a.IPs
	}
	if a.MainIP != "" {
		return []string{a.MainIP}
	}
	return []string{}
}

// podView is one pod allocation of "pods" (-o json and yaml: stable
// field names).
type podView struct {
	Namespace   string     `json:"namespace"`
	Name        string     `json:"name"`
	IPs         []string   `json:"ips"`
	Node        string     `json:"node"`
	ContainerID string     `json:"containerId,omitempty"`
	Network     string     `json:"network,omitempty"`
	IfName      string     `json:"ifName,omitempty"`
	AllocatedAt *time.Time `json:"allocatedAt,omitempty"`
}

// unreachable is an agent that did not answer.
type unreachable struct {
	Node  string `json:"node"`
	URL   string `json:"url,omitempty"`
	Error string `json:"error"`
}

// podsReply is -o json and yaml of "pods".
type podsReply struct {
	Pods []podView `json:"pods"`
	// Unreachable are the agents not listed (the exit status is 1).
	Unreachable []unreachable `json:"unreachable"`
}

func podsUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] pods [-node N] [-namespace NS] [-o table|wide|json|yaml|name]

List the pods holding addresses, as their agents hold them: the agents are found in etcd
(-etcd: their status records name their REST servers) and each is asked for its
allocations (GET /contiv/v1/ipam/allocations), at most 16 at once, each within -timeout,
with the credentials of the global flags. -node N asks only node N's agent.

Columns: NAMESPACE, NAME, IPS, NODE, CONTAINER (the CNI container ID, cut to 13 characters;
wide: whole), AGE (since the allocation, when the agent reports it); wide adds NETWORK and
IFNAME. name prints namespace/name only.

An agent that cannot be asked (unreachable, an error, no REST address in its status record,
present without a status record) is a warning on stderr naming the node and the URL; the
other nodes are listed, and the exit status is 1.

`)
	printDefaults(w, podsFlags(new(podsOptions)))
	_, _ = fmt.Fprint(w, `
"contiv-netctl -h" lists the global flags.
`)
}

// podsOptions are the flags of "pods".
type podsOptions struct {
	node, namespace, format string
}

func podsFlags(o *podsOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("pods", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.node, "node", "", "ask only the agent of the node `name`")
	fs.StringVar(&o.namespace, "namespace", "", "list only the pods of `namespace`")
	fs.StringVar(&o.format, "o", formatTable, "output `format`: table, wide, json, yaml or name")
	return fs
}

// agentTarget is an agent to ask: its node and REST URL, or why it
// cannot be asked.
type agentTarget struct {
	node, url string
	stale     string // "" or the age of a stale status record
	problem   string
}

// podsCommand runs "pods".
func podsCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	var o podsOptions
	fs := podsFlags(&o)
	if err := parseFlags(fs, args, podsUsage); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("pods: unexpected argument %q (a node goes with -node N)", fs.Arg(0)), usage: podsUsage}
	}
	if err := checkFormat("pods", o.format, []string{formatTable, formatWide, formatJSON, formatYAML, formatName}, podsUsage); err != nil {
		return err
	}
	if _, err := newClient(g, podsUsage); err != nil { // the credentials and TLS flags
		return err
	}
	e, err := newEtcd(g, podsUsage)
	if err != nil {
		return err
	}
	defer e.close()
	snap, err := e.readAgents(ctx)
	if err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	targets, warnings := agentTargets(snap, cio.now())
	for _, w := range warnings {
		_, _ = fmt.Fprintf(cio.stderr, "contiv-netctl: warning: %s\n", w)
	}
	if o.node != "" {
		i := slices.IndexFunc(targets, func(t agentTarget) bool { return t.node == o.node })
		if i < 0 {
			return fmt.Errorf("pods: node %q has no agent status record in etcd %s (\"contiv-netctl nodes\" lists the nodes)",
				o.node, strings.Join(e.endpoints, ","))
		}
		targets = targets[i : i+1]
	}
	reply := askAgents(ctx, g, targets, o.namespace)
	for _, u := range reply.Unreachable {
		_, _ = fmt.Fprintf(cio.stderr, "contiv-netctl: warning: node %s: %s\n", u.Node, u.Error)
	}
	switch o.format {
	case formatJSON, formatYAML:
		if err := writeData(cio.stdout, o.format, reply); err != nil {
			return err
		}
	case formatName:
		for _, p := range reply.Pods {
			_, _ = fmt.Fprintf(cio.stdout, "%s/%s\n", p.Namespace, p.Name)
		}
	default:
		if err := printPods(cio.stdout, reply.Pods, o.format == formatWide, cio.now()); err != nil {
			return err
		}
	}
	if n := len(reply.Unreachable); n > 0 {
		return fmt.Errorf("pods: %d of %d agents not listed (see the warnings above)", n, len(targets))
	}
	return nil
}

// agentTargets are the agents of snap's status records (sorted by node),
// and nodes with a presence key but no status record, which cannot be
// asked. A record that does not decode is left out with a warning.
func agentTargets(snap *snapshot, now time.Time) ([]agentTarget, []string) {
	var warnings []string
	seen := map[string]bool{}
	var out []agentTarget
	for _, kv := range snap.status {
		name, err := agentstatus.ParseKey(string(kv.Key))
		if err != nil {
			warnings = append(warnings, err.Error())
			continue
		}
		seen[name] = true
		st, err := agentstatus.Decode(kv.Value)
		if err != nil {
			out = append(out, agentTarget{node: name, problem: fmt.Sprintf("agent status %s: %v", kv.Key, err)})
			continue
		}
		t := agentTarget{node: name, url: st.REST}
		if st.Stale(now) {
			t.stale = age(now, st.Updated)
		}
		if st.REST == "" {
			t.problem = "its agent status record names no REST server"
		}
		out = append(out, t)
	}
	for _, kv := range snap.presence {
		name := strings.TrimPrefix(string(kv.Key), presencePrefix)
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, agentTarget{node: name, problem: "its agent is present but publishes no status record (an older agent?)"})
		}
	}
	slices.SortFunc(out, func(a, b agentTarget) int { return strings.Compare(a.node, b.node) })
	return out, warnings
}

// askAgents asks each target for its allocations, at most agentLimit at
// once; the pods of namespace ns ("" any) sorted by namespace, name and
// node, and the agents not asked or not answering.
func askAgents(ctx context.Context, g *globals, targets []agentTarget, ns string) podsReply {
	reply := podsReply{Pods: []podView{}, Unreachable: []unreachable{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, agentLimit)
	for _, t := range targets {
		if t.problem != "" {
			mu.Lock()
			reply.Unreachable = append(reply.Unreachable, unreachable{Node: t.node, URL: t.url, Error: t.problem})
			mu.Unlock()
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			pods, err := agentPods(ctx, g, t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				msg := err.Error()
				if t.stale != "" {
					msg += fmt.Sprintf(" (its status record is stale: updated %s ago)", t.stale)
				}
				reply.Unreachable = append(reply.Unreachable, unreachable{Node: t.node, URL: t.url, Error: msg})
				return
			}
			for _, p := range pods {
				if ns == "" || p.Namespace == ns {
					reply.Pods = append(reply.Pods, p)
				}
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(reply.Pods, func(a, b podView) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.Node, b.Node),
			strings.Compare(a.ContainerID, b.ContainerID))
	})
	slices.SortFunc(reply.Unreachable, func(a, b unreachable) int { return strings.Compare(a.Node, b.Node) })
	return reply
}

// agentPods asks t's agent for its allocations: its pods (owner-keyed
// allocations are no pods and are left out).
func agentPods(ctx context.Context, g *globals, t agentTarget) ([]podView, error) {
	c, err := newClientAt(g, t.url, "the status record of node "+t.node, podsUsage)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return nil, errors.New(ue.msg)
		}
		return nil, err
	}
	body, err := c.do(ctx, http.MethodGet, allocationsPath, nil, nil)
	if err != nil {
		return nil, err
	}
	var list allocationList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET %s: the reply %q: %w", c.url(allocationsPath, nil), cut(string(body)), err)
	}
	out := make([]podView, 0, len(list.Pods))
	for _, a := range list.Pods {
		if a.Owner != "" {
			continue
		}
		p := podView{Namespace: a.PodID.Namespace, Name: a.PodID.Name, IPs: a.addresses(), Node: t.node,
			ContainerID: a.ContainerID, Network: a.Network, IfName: a.IfName}
		if at, err := time.Parse(time.RFC3339Nano, a.AllocatedAt); err == nil {
			p.AllocatedAt = &at
		}
		out = append(out, p)
	}
	return out, nil
}

// shortID is the length of a container ID in the table.
const shortID = 13

// printPods prints pods as a table.
func printPods(w io.Writer, pods []podView, wide bool, now time.Time) error {
	if len(pods) == 0 {
		_, _ = fmt.Fprintln(w, "no pods")
		return nil
	}
	tw := newTable(w)
	head := []string{"NAMESPACE", "NAME", "IPS", "NODE", "CONTAINER", "AGE"}
	if wide {
		head = append(head, "NETWORK", "IFNAME")
	}
	row(tw, head...)
	for _, p := range pods {
		cid := p.ContainerID
		if !wide && len(cid) > shortID {
			cid = cid[:shortID]
		}
		since := "-"
		if p.AllocatedAt != nil {
			since = age(now, *p.AllocatedAt)
		}
		cells := []string{cell(p.Namespace), cell(p.Name), joinOr(p.IPs), cell(p.Node), cell(cid), since}
		if wide {
			cells = append(cells, cell(p.Network), cell(p.IfName))
		}
		row(tw, cells...)
	}
	return tw.Flush()
}
