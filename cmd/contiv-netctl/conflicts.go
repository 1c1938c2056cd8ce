package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
)

// The ipam conflicts commands: the stored allocation records a restore of
// the agent could not place (an address clash, a record outside every pod
// subnet and pool of the node), which the agent moves aside instead of
// deleting them; listed, then put back or deleted one by one.

// The REST paths of ipam.ConflictsPath, ipam.OperatorRestoreConflictPath
// and ipam.OperatorDiscardConflictPath (copied, as checkpointPath; a test
// checks that they agree).
const (
	conflictsPath       = "/contiv/v1/ipam/conflicts"
	restoreConflictPath = "/contiv/v1/ipam/operator/conflicts/restore"
	discardConflictPath = "/contiv/v1/ipam/operator/conflicts/discard"
)

// conflict is ipam.Conflict, one record moved aside: Name identifies it
// for restore and discard, Key and Value are the record as it was stored.
type conflict struct {
	Name  string `json:"name"`
	PodID struct {
		Name      string `json:"Name"`
		Namespace string `json:"Namespace"`
	} `json:"PodID"`
	IP          string   `json:"ip"`
	IPs         []string `json:"ips,omitempty"`
	KeptFor     string   `json:"keptFor"`
	Reason      string   `json:"reason,omitempty"`
	At          string   `json:"at"`
	Key         string   `json:"key,omitempty"`
	Value       string   `json:"value,omitempty"`
	Network     string   `json:"network,omitempty"`
	ContainerID string   `json:"containerId,omitempty"`
	IfName      string   `json:"ifName,omitempty"`
}

// conflictList is ipam.Conflicts, the reply of GET conflictsPath.
type conflictList struct {
	Conflicts []conflict `json:"conflicts"`
}

// conflictReply is ipam.OperatorConflict, the reply of restore and
// discard.
type conflictReply struct {
	Conflict  string `json:"conflict"`
	Restored  bool   `json:"restored,omitempty"`
	Discarded bool   `json:"discarded,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// conflictHints say what the reasons of a refused restore or discard
// (ipam.operatorStatus) mean for the operator; any other reason is quoted
// as the server gave it.
var conflictHints = map[string]string{
	"no-such-conflict": `"contiv-netctl ipam conflicts" lists the names`,
	"cannot-restore": "free the address (release its holder) or add its pool back, then restore; " +
		"or discard the record once its pod is gone",
	"forbidden": "restore and discard need an agent whose REST server authenticates its clients " +
		"(client-basic-auth or client-cert-files in its http.conf)",
	"not-ready": "the agent's IPAM has not processed its first resync, or is closing: try again",
}

func conflictsUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage:
  contiv-netctl [global flags] ipam conflicts [list]
  contiv-netctl [global flags] ipam conflicts restore NAME
  contiv-netctl [global flags] ipam conflicts discard NAME

When the agent restores its stored pod allocations (at start-up, at every resync) a record it
cannot place (two records of one address, a record outside every pod subnet and pool of the
node) is moved aside, never deleted.

list (the default) prints those records (GET /contiv/v1/ipam/conflicts): NAME, the pod, the
address(es), the allocation that kept the address (KEPT-FOR), when (AT) and why (REASON).

restore puts the record moved aside as NAME back (POST /contiv/v1/ipam/operator/conflicts/restore):
its allocation holds its addresses again; the agent refuses (409 cannot-restore) while one of
them is held or outside the node's pod subnets and pools.

discard deletes the record moved aside as NAME (POST /contiv/v1/ipam/operator/conflicts/discard),
once its pod is known to be gone.

restore and discard need an agent whose REST server authenticates its clients (http.conf
client-basic-auth, or client-cert-files): give -user, or -cacert with -cert and -key.

"contiv-netctl -h" lists the global flags.
`)
}

func restoreUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] ipam conflicts restore NAME

Put the record moved aside as NAME ("contiv-netctl ipam conflicts" lists them) back.
`)
}

func discardUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] ipam conflicts discard NAME

Delete the record moved aside as NAME ("contiv-netctl ipam conflicts" lists them).
`)
}

// conflictsCommand runs "ipam conflicts ...".
func conflictsCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	const commands = "(the commands: list, restore, discard)"
	switch {
	case len(args) == 0:
		return listConflicts(ctx, g, cio)
	case isHelp(args[0]):
		return &helpRequest{usage: conflictsUsage}
	case args[0] == "list":
		if len(args) > 1 {
			return &usageError{msg: fmt.Sprintf("ipam conflicts list: unexpected argument %q", args[1]), usage: conflictsUsage}
		}
		return listConflicts(ctx, g, cio)
	case args[0] == "restore":
		return resolveConflict(ctx, g, args[1:], cio, conflictOp{verb: "restore", done: "restored", path: restoreConflictPath, usage: restoreUsage})
	case args[0] == "discard":
		return resolveConflict(ctx, g, args[1:], cio, conflictOp{verb: "discard", done: "discarded", path: discardConflictPath, usage: discardUsage})
	case strings.HasPrefix(args[0], "-"):
		return &usageError{msg: fmt.Sprintf("ipam conflicts: unknown flag %q %s", args[0], commands), usage: conflictsUsage}
	}
	return &usageError{msg: fmt.Sprintf("ipam conflicts: unknown command %q %s", args[0], commands), usage: conflictsUsage}
}

// listConflicts: GET the records moved aside and print them as a table.
func listConflicts(ctx context.Context, g *globals, cio *cmdIO) error {
	c, err := newClient(g, conflictsUsage)
	if err != nil {
		return err
	}
	reply, err := c.do(ctx, http.MethodGet, conflictsPath, nil, nil)
	if err != nil {
		return fmt.Errorf("ipam conflicts: %w", withReasonHint(err))
	}
	var list conflictList
	if err := json.Unmarshal(reply, &list); err != nil {
		return fmt.Errorf("ipam conflicts: the agent's reply %q: %w", cut(string(reply)), err)
	}
	if len(list.Conflicts) == 0 {
		_, _ = fmt.Fprintln(cio.stdout, "no conflicts: every stored allocation record was placed")
		return nil
	}
	tw := tabwriter.NewWriter(cio.stdout, 0, 8, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tPOD\tIPS\tKEPT-FOR\tAT\tREASON")
	for _, cf := range list.Conflicts {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(cf.Name), cell(cf.pod()), cell(cf.addresses()),
			cell(cf.KeptFor), cell(cf.At), cell(cf.Reason))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("ipam conflicts: writing to stdout: %w", err)
	}
	return nil
}

// pod is the record's pod as namespace/name.
func (cf *conflict) pod() string {
	switch {
	case cf.PodID.Name == "" && cf.PodID.Namespace == "":
		return ""
	case cf.PodID.Namespace == "":
		return cf.PodID.Name
	}
	return cf.PodID.Namespace + "/" + cf.PodID.Name
}

// addresses are the record's addresses: every one of a dual-stack
// record, else its one.
func (cf *conflict) addresses() string {
	if len(cf.IPs) > 0 {
		return strings.Join(cf.IPs, ",")
	}
	return cf.IP
}

// cell is s as a table cell: "-" for nothing, no tab or line break (they
// would break the columns).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// conflictOp is restore or discard.
type conflictOp struct {
	verb  string // "restore", "discard"
	done  string // "restored", "discarded"
	path  string
	usage func(io.Writer)
}

// resolveConflict: POST {"conflict": NAME} to op's path and print what
// the agent did.
func resolveConflict(ctx context.Context, g *globals, args []string, cio *cmdIO, op conflictOp) error {
	fs := flag.NewFlagSet(op.verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := parseFlags(fs, args, op.usage); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 0:
		return &usageError{msg: fmt.Sprintf("ipam conflicts %s: no NAME given (\"contiv-netctl ipam conflicts\" lists them)", op.verb), usage: op.usage}
	case fs.NArg() > 1:
		return &usageError{msg: fmt.Sprintf("ipam conflicts %s: %d arguments %q: want one NAME", op.verb, fs.NArg(), fs.Args()), usage: op.usage}
	case fs.Arg(0) == "":
		return &usageError{msg: fmt.Sprintf("ipam conflicts %s: the NAME is empty", op.verb), usage: op.usage}
	}
	name := fs.Arg(0)
	c, err := newClient(g, op.usage)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]string{"conflict": name})
	if err != nil {
		return fmt.Errorf("ipam conflicts %s %q: %w", op.verb, name, err)
	}
	reply, err := c.do(ctx, http.MethodPost, op.path, nil, body)
	if err != nil {
		return fmt.Errorf("ipam conflicts %s %q: %w", op.verb, name, withReasonHint(err))
	}
	var res conflictReply
	if err := json.Unmarshal(reply, &res); err != nil {
		return fmt.Errorf("ipam conflicts %s %q: the agent's reply %q: %w", op.verb, name, cut(string(reply)), err)
	}
	done := res.Restored
	if op.verb == "discard" {
		done = res.Discarded
	}
	if !done {
		return fmt.Errorf("ipam conflicts %s %q: the agent's reply %q does not say %s", op.verb, name, cut(string(reply)), op.done)
	}
	line := fmt.Sprintf("%s conflict %q", op.done, name)
	if res.Detail != "" {
		line += ": " + res.Detail
	}
	_, _ = fmt.Fprintln(cio.stdout, line)
	return nil
}

// withReasonHint adds to a refusal of the agent what its reason means
// (conflictHints), or the reason itself when there is no hint for it; a
// 404 without a reason is an agent without the conflicts calls.
func withReasonHint(err error) error {
	var se *serverError
	if !errors.As(err, &se) || se.hint != "" {
		return err
	}
	switch h, ok := conflictHints[se.reason]; {
	case ok:
		se.hint = se.reason + ": " + h
	case se.reason != "":
		se.hint = "reason " + se.reason
	case se.status == http.StatusNotFound:
		se.hint = "the agent does not serve this call: it is older than the conflicts calls"
	}
	return err
}
