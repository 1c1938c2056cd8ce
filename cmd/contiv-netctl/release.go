package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
)

// The ipam release command: the addresses of a report of "ipam check -o
// json", each released only while the agent still holds it for the pod
// the report names.

// releasePath is ipam.OperatorReleasePath (copied; a test checks that
// they agree).
const releasePath = "/contiv/v1/ipam/operator/release"

// releaseReply is ipam.OperatorRelease, the reply of a release.
type releaseReply struct {
	IP       string   `json:"ip,omitempty"`
	Owner    string   `json:"owner,omitempty"`
	Pod      string   `json:"pod,omitempty"`
	IPs      []string `json:"ips,omitempty"`
	Released bool     `json:"released"`
}

func releaseUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] ipam release -from-report file

Release the addresses of the release candidates listed in file, a report saved with
"contiv-netctl ipam check -o json" (- : stdin), and nothing else. Each address is released
only if the agent still holds it for the pod the report names: the agent checks this in the
step that releases (POST /contiv/v1/ipam/operator/release?force=true with {"ip", "pod"}). An
address another pod or owner holds now (moved), or that nobody holds (free), is skipped.
force=true releases a CNI attachment's address too, the report being the operator's review,
and only for the report's pods.

The report is checked first: one that is not JSON, of another format, with a field of the
wrong type, a candidate without a pod, or a bad address, is refused naming the field and the
value, and so is a report of another node than the agent's; nothing is released then.

One line per address: released, skipped (why) or failed (why); then the counts. Exit 1 if
a release failed (a skip is no failure).

Needs an agent whose REST server authenticates its clients (http.conf client-basic-auth, or
client-cert-files): give -user, or -cacert with -cert and -key.

`)
	printDefaults(w, releaseFlags(new(string)))
	_, _ = fmt.Fprint(w, `
"contiv-netctl -h" lists the global flags.
`)
}

func releaseFlags(from *string) *flag.FlagSet {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(from, "from-report", "", "release the addresses the report in `file` lists (- : stdin), as \"ipam check -o json\" wrote it")
	return fs
}

// releaseCommand runs "ipam release".
func releaseCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	var from string
	fs := releaseFlags(&from)
	if err := parseFlags(fs, args, releaseUsage); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return &usageError{msg: fmt.Sprintf("ipam release: unexpected argument %q (the report goes with -from-report file)", fs.Arg(0)), usage: releaseUsage}
	case from == "":
		return &usageError{msg: "ipam release: no report given: want -from-report file (written by \"contiv-netctl ipam check -o json\")", usage: releaseUsage}
	}
	c, err := newClient(g, releaseUsage)
	if err != nil {
		return err
	}
	data, err := readInput(from, cio.stdin, "a report may hold")
	if err != nil {
		return fmt.Errorf("ipam release: %w", err)
	}
	if from == "-" {
		from = "stdin"
	}
	rep, err := decodeReport(data)
	if err != nil {
		return fmt.Errorf("ipam release: %s: invalid report: %w; nothing released", from, err)
	}
	if len(rep.pods) == 0 {
		_, _ = fmt.Fprintf(cio.stdout, "%s lists no release candidates: nothing to release\n", from)
		return nil
	}
	node, err := getNode(ctx, c)
	if err != nil {
		return fmt.Errorf("ipam release: which node the agent serves: %w; nothing released", err)
	}
	if node.NodeName != rep.node {
		return fmt.Errorf("ipam release: %s is a report of node %q; the agent at %s serves node %q; nothing released",
			from, rep.node, c.base.Redacted(), node.NodeName)
	}
	return releaseReport(ctx, c, from, rep, cio.stdout)
}

// tally counts the outcomes of a release from a report.
type tally struct{ released, skipped, failed, listed int }

// releaseReport releases the addresses of rep one by one, prints one
// line for each and the counts; an error if one failed.
func releaseReport(ctx context.Context, c *client, from string, rep *checkedReport, w io.Writer) error {
	var n tally
	for _, p := range rep.pods {
		n.listed += len(p.addrs)
		if len(p.addrs) == 0 {
			_, _ = fmt.Fprintf(w, "skipped pod %s: the report lists no address of it\n", p.pod)
		}
		releasePod(ctx, c, p, w, &n)
		if ctx.Err() != nil {
			break
		}
	}
	_, _ = fmt.Fprintf(w, "released %d, skipped %d, failed %d of %d addresses in %s (node %q%s)\n",
		n.released, n.skipped, n.failed, n.listed, from, rep.node, takenAt(rep.takenAt))
	switch {
	case ctx.Err() != nil:
		return errors.New("ipam release: interrupted; the addresses after the last line were not tried")
	case n.failed > 0:
		return fmt.Errorf("ipam release: %d of %d addresses failed (see above)", n.failed, n.listed)
	}
	return nil
}

// takenAt is ", taken at T" when the report says when.
func takenAt(t string) string {
	if t == "" {
		return ""
	}
	return ", taken at " + t
}

// releasePod releases the addresses of one pod of a report. An address
// the agent released with an earlier one (the families of one
// allocation) is not asked for again.
func releasePod(ctx context.Context, c *client, p reportPod, w io.Writer, n *tally) {
	releasedWith := map[netip.Addr]netip.Addr{}
	for _, a := range p.addrs {
		if ctx.Err() != nil {
			return
		}
		if first, ok := releasedWith[a]; ok {
			n.released++
			_, _ = fmt.Fprintf(w, "released %s (pod %s; with %s)\n", a, p.pod, first)
			continue
		}
		reply, err := releaseOne(ctx, c, a, p)
		if err != nil {
			noteRefusal(w, a, p.pod, err, n)
			continue
		}
		n.released++
		_, _ = fmt.Fprintf(w, "released %s (pod %s)\n", a, p.pod)
		for _, s := range reply.IPs {
			other, err := netip.ParseAddr(s)
			if err != nil || other == a {
				continue
			}
			releasedWith[other] = a
			if !slices.Contains(p.addrs, other) {
				_, _ = fmt.Fprintf(w, "released %s (pod %s; with %s: its allocation held it, the report does not list it)\n", other, p.pod, a)
			}
		}
	}
}

// releaseOne asks the agent to release a if p's pod (of p's UID, when
// the report knows it) holds it.
func releaseOne(ctx context.Context, c *client, a netip.Addr, p reportPod) (*releaseReply, error) {
	req := map[string]string{"ip": a.String(), "pod": p.pod}
	if p.uid != "" {
		req["uid"] = p.uid
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	data, err := c.do(ctx, http.MethodPost, releasePath, url.Values{"force": {"true"}}, body)
	if err != nil {
		return nil, err
	}
	var reply releaseReply
	if err := json.Unmarshal(data, &reply); err != nil || !reply.Released {
		return nil, fmt.Errorf("the agent's reply %q does not say released", cut(string(data)))
	}
	return &reply, nil
}

// noteRefusal prints and counts a release the agent refused: a skip
// when the address is free or another's, else a failure.
func noteRefusal(w io.Writer, a netip.Addr, pod string, err error, n *tally) {
	var se *serverError
	errors.As(err, &se)
	switch {
	case se != nil && se.reason == "not-allocated":
		n.skipped++
		_, _ = fmt.Fprintf(w, "skipped %s (pod %s): free: no allocation holds it\n", a, pod)
	case se != nil && se.reason == "moved":
		n.skipped++
		_, _ = fmt.Fprintf(w, "skipped %s (pod %s): moved: %s\n", a, pod, se.msg)
	default:
		n.failed++
		_, _ = fmt.Fprintf(w, "failed %s (pod %s): %v\n", a, pod, releaseHint(err))
	}
}

// releaseHint adds what a refusal means; an agent that does not know the
// pod condition refuses the body (400).
func releaseHint(err error) error {
	var se *serverError
	if errors.As(err, &se) && se.status == http.StatusBadRequest && se.hint == "" {
		se.hint = "the agent may be older than the release with a pod condition"
	}
	return withReasonHint(err)
}
