package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// The ipam check command: the pods holding addresses that the Kubernetes
// state lacks (release candidates), which the agent releases only if
// they are still missing at the end of their grace period. As a table,
// or with -o json as a report (report.go) that "ipam release
// -from-report" takes.

// candidatesPath is ipam.CandidatesPath, and ipamPath ipam.IPAMPath
// (copied; a test checks that they agree).
const (
	candidatesPath = "/contiv/v1/ipam/release-candidates"
	ipamPath       = "/contiv/v1/ipam"
)

// candidateList is ipam.ReleaseCandidates.
type candidateList struct {
	Running     bool        `json:"running"`
	Blocked     string      `json:"blocked,omitempty"`
	GracePeriod string      `json:"gracePeriod"`
	Candidates  []candidate `json:"candidates"`
}

// candidate is ipam.ReleaseCandidate.
type candidate struct {
	Pod          string   `json:"pod"`
	UID          string   `json:"uid,omitempty"`
	IPs          []string `json:"ips"`
	MissingSince string   `json:"missingSince"`
	ReleaseAt    string   `json:"releaseAt"`
	SandboxLives bool     `json:"sandboxLives,omitempty"`
}

// nodeInfo is what contiv-netctl reads of ipam.NodeIPAMInfo, the reply
// of GET ipamPath: the node the agent serves.
type nodeInfo struct {
	NodeID   uint32 `json:"nodeId"`
	NodeName string `json:"nodeName"`
}

func checkUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] ipam check [-o table|json]

List the release candidates (GET /contiv/v1/ipam/release-candidates): the pods holding
addresses that the agent's Kubernetes state lacks, soonest first, with their addresses, since
when they are missing (MISSING-SINCE) and when they are released if a look then still misses
them (RELEASE-AT). Nothing is released by this command.

-o json writes a report instead of the table: the agent's release candidates with the node it
serves (GET /contiv/v1/ipam), the server and when the report was taken, to save, review, and
hand to "contiv-netctl ipam release -from-report file".

`)
	printDefaults(w, checkFlags(new(string)))
	_, _ = fmt.Fprint(w, `
"contiv-netctl -h" lists the global flags.
`)
}

func checkFlags(format *string) *flag.FlagSet {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(format, "o", "table", "output `format`: table, or json (a report for ipam release -from-report)")
	return fs
}

// checkCommand runs "ipam check".
func checkCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	var format string
	fs := checkFlags(&format)
	if err := parseFlags(fs, args, checkUsage); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return &usageError{msg: fmt.Sprintf("ipam check: unexpected argument %q", fs.Arg(0)), usage: checkUsage}
	case format != "table" && format != "json":
		return &usageError{msg: fmt.Sprintf("ipam check: -o %q: want table or json", format), usage: checkUsage}
	}
	c, err := newClient(g, checkUsage)
	if err != nil {
		return err
	}
	if format == "json" {
		return writeReport(ctx, c, g.server, cio)
	}
	list, err := getCandidates(ctx, c)
	if err != nil {
		return err
	}
	return printCandidates(cio.stdout, list)
}

// getCandidates is GET candidatesPath.
func getCandidates(ctx context.Context, c *client) (*candidateList, error) {
	reply, err := c.do(ctx, http.MethodGet, candidatesPath, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("ipam check: %w", withReasonHint(err))
	}
	var list candidateList
	if err := json.Unmarshal(reply, &list); err != nil {
		return nil, fmt.Errorf("ipam check: the agent's reply %q: %w", cut(string(reply)), err)
	}
	return &list, nil
}

// getNode is GET ipamPath: the node the agent serves.
func getNode(ctx context.Context, c *client) (*nodeInfo, error) {
	reply, err := c.do(ctx, http.MethodGet, ipamPath, nil, nil)
	if err != nil {
		return nil, withReasonHint(err)
	}
	var info nodeInfo
	if err := json.Unmarshal(reply, &info); err != nil {
		return nil, fmt.Errorf("the agent's reply %q: %w", cut(string(reply)), err)
	}
	if info.NodeName == "" {
		return nil, fmt.Errorf("the agent's reply %q names no node", cut(string(reply)))
	}
	return &info, nil
}

// writeReport writes the report of the agent's release candidates to
// stdout.
func writeReport(ctx context.Context, c *client, server string, cio *cmdIO) error {
	node, err := getNode(ctx, c)
	if err != nil {
		return fmt.Errorf("ipam check: %w", err)
	}
	list, err := getCandidates(ctx, c)
	if err != nil {
		return err
	}
	rep := report{Version: reportVersion, Server: server, Node: node.NodeName, NodeID: node.NodeID,
		TakenAt: time.Now().UTC().Format(time.RFC3339), candidateList: *list}
	if rep.Candidates == nil {
		rep.Candidates = []candidate{}
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("ipam check: %w", err)
	}
	if _, err := cio.stdout.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("ipam check: writing to stdout: %w", err)
	}
	return nil
}

// printCandidates prints list as a table.
func printCandidates(w io.Writer, list *candidateList) error {
	state := "running"
	switch {
	case !list.Running && list.Blocked != "":
		state = "paused: " + cell(list.Blocked)
	case !list.Running:
		state = "paused (the Kubernetes state comes from the agent's local mirror)"
	}
	if len(list.Candidates) == 0 {
		_, _ = fmt.Fprintf(w, "no release candidates: every pod holding an address is in the Kubernetes state (grace period %s, %s)\n",
			cell(list.GracePeriod), state)
		return nil
	}
	_, _ = fmt.Fprintf(w, "%d release candidate(s); grace period %s, %s\n", len(list.Candidates), cell(list.GracePeriod), state)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "POD\tIPS\tMISSING-SINCE\tRELEASE-AT")
	for _, cd := range list.Candidates {
		at := cell(cd.ReleaseAt)
		if cd.SandboxLives {
			at += " (kept: the container runtime lists its sandbox)"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(cd.Pod), cell(strings.Join(cd.IPs, ",")), cell(cd.MissingSince), at)
	}
	return tw.Flush()
}
