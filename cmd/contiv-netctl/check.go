package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
)

// The ipam check command: the pods holding addresses that the Kubernetes
// state lacks (release candidates), which the agent releases only if
// they are still missing at the end of their grace period.

// candidatesPath is ipam.CandidatesPath (copied; a test checks that they
// agree).
const candidatesPath = "/contiv/v1/ipam/release-candidates"

// candidateList is ipam.ReleaseCandidates.
type candidateList struct {
	Running     bool        `json:"running"`
	GracePeriod string      `json:"gracePeriod"`
	Candidates  []candidate `json:"candidates"`
}

// candidate is ipam.ReleaseCandidate.
type candidate struct {
	Pod          string   `json:"pod"`
	IPs          []string `json:"ips"`
	MissingSince string   `json:"missingSince"`
	ReleaseAt    string   `json:"releaseAt"`
}

func checkUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] ipam check

List the release candidates (GET /contiv/v1/ipam/release-candidates): the pods holding
addresses that the agent's Kubernetes state lacks, soonest first, with their addresses, since
when they are missing (MISSING-SINCE) and when they are released if a look then still misses
them (RELEASE-AT). Nothing is released by this command.

"contiv-netctl -h" lists the global flags.
`)
}

// checkCommand runs "ipam check".
func checkCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	if len(args) > 0 {
		if isHelp(args[0]) {
			return &helpRequest{usage: checkUsage}
		}
		return &usageError{msg: fmt.Sprintf("ipam check: unexpected argument %q", args[0]), usage: checkUsage}
	}
	c, err := newClient(g, checkUsage)
	if err != nil {
		return err
	}
	reply, err := c.do(ctx, http.MethodGet, candidatesPath, nil, nil)
	if err != nil {
		return fmt.Errorf("ipam check: %w", withReasonHint(err))
	}
	var list candidateList
	if err := json.Unmarshal(reply, &list); err != nil {
		return fmt.Errorf("ipam check: the agent's reply %q: %w", cut(string(reply)), err)
	}
	state := "running"
	if !list.Running {
		state = "paused (the Kubernetes state comes from the agent's local mirror)"
	}
	if len(list.Candidates) == 0 {
		_, _ = fmt.Fprintf(cio.stdout, "no release candidates: every pod holding an address is in the Kubernetes state (grace period %s, %s)\n",
			cell(list.GracePeriod), state)
		return nil
	}
	_, _ = fmt.Fprintf(cio.stdout, "%d release candidate(s); grace period %s, %s\n", len(list.Candidates), cell(list.GracePeriod), state)
	tw := tabwriter.NewWriter(cio.stdout, 0, 8, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "POD\tIPS\tMISSING-SINCE\tRELEASE-AT")
	for _, cd := range list.Candidates {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(cd.Pod), cell(strings.Join(cd.IPs, ",")), cell(cd.MissingSince), cell(cd.ReleaseAt))
	}
	return tw.Flush()
}
