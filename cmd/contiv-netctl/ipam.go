package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// The ipam commands: the agent's IPAM REST calls.

// checkpointPath is ipam.CheckpointPath (not imported: the plugin would
// bring the agent's dependencies into this binary; a test checks that
// they agree).
const checkpointPath = "/contiv/v1/ipam/checkpoint"

// importReply is ipam.CheckpointImport, the reply of an import.
type importReply struct {
	Imported       int      `json:"imported"`
	Skipped        int      `json:"skipped"`
	SkippedReasons []string `json:"skippedReasons"`
}

// maxDocument bounds a checkpoint document: what the agent imports at
// most (the body limit of POST /contiv/v1/ipam/checkpoint).
const maxDocument = 16 << 20

func ipamUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] ipam [-o table|wide|json|yaml] [NODE]
       contiv-netctl [global flags] ipam <command> ...

Without a command: the node's IPAM (node ID, pod subnets, gateway, NAT loopback, VXLAN,
interconnect; pools with fill bars, cooldowns, reservations, release candidates) of the agent
at -server, or of NODE's agent (found in etcd); "contiv-netctl ipam -o x -h" describes it.

Commands:
  check [-o table|json]                 list the pods holding addresses that the Kubernetes
                                        state lacks (released only if still missing later);
                                        -o json: as a report to save and review
  release -from-report file             release the addresses a report lists, each only if
                                        the pod it names still holds it
  checkpoint export [-o file]           save every allocation of the agent's node
  checkpoint import [-replace] file|-   restore the allocations of a checkpoint file
  checkpoint import -from aws-vpc-cni [-replace] file|-
                                        restore those of the AWS VPC CNI's checkpoint
                                        (/var/run/aws-node/ipam.json), converted
  conflicts [list]                      list the stored allocation records the agent moved
                                        aside (an address clash, outside the node's pools)
  conflicts restore NAME                put the record moved aside as NAME back
  conflicts discard NAME                delete the record moved aside as NAME

"contiv-netctl -h" lists the global flags.
`)
}

func checkpointUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage:
  contiv-netctl [global flags] ipam checkpoint export [-o file]
  contiv-netctl [global flags] ipam checkpoint import [-replace] file|-
  contiv-netctl [global flags] ipam checkpoint import -from aws-vpc-cni [-replace] file|-

export saves every allocation of the agent's node (GET /contiv/v1/ipam/checkpoint) as a
checkpoint document: to -o file (written to a temporary file in the same directory, synced,
then renamed over file: never half-written), or to stdout.

import reads a checkpoint document from file (- : stdin), checks it (a bad document, or one
of a newer format, is refused before anything is sent), sends it to the agent (POST
/contiv/v1/ipam/checkpoint) and prints what was imported and what was skipped. Without
-replace the agent refuses when its node holds allocations; with -replace it drops them first.

import -from aws-vpc-cni reads the IPAM checkpoint the AWS VPC CNI writes on a node
(/var/run/aws-node/ipam.json, version "vpc-cni-ipam/1") instead, so that a node moving from
the AWS VPC CNI keeps its pods' addresses: each entry (networkName, containerID, ifName,
ipv4 or ipv6, allocationTimestamp, metadata k8sPodNamespace and k8sPodName) becomes an
attachment of a checkpoint document, which is sent as above. A bad file is refused naming
the entry, the field and the value, before anything is sent.

Both need an agent whose REST server authenticates its clients (http.conf client-basic-auth,
or client-cert-files): give -user, or -cacert with -cert and -key.

"contiv-netctl -h" lists the global flags.
`)
}

func exportUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, "Usage: contiv-netctl [global flags] ipam checkpoint export [-o file]\n\n")
	printDefaults(w, exportFlags(new(string)))
}

func importUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] ipam checkpoint import [-replace] file|-
       contiv-netctl [global flags] ipam checkpoint import -from aws-vpc-cni [-replace] file|-

`)
	printDefaults(w, importFlags(new(bool), new(string)))
}

func exportFlags(out *string) *flag.FlagSet {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(out, "o", "", "write the document to `file` (atomically; mode 0600) instead of stdout")
	return fs
}

func importFlags(replace *bool, from *string) *flag.FlagSet {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(replace, "replace", false, "drop the allocations the node holds first (without it the agent refuses a node that holds any)")
	fs.StringVar(from, "from", fromContiv, "the `format` of the file: contiv (a checkpoint export wrote), or aws-vpc-cni (the AWS VPC CNI's ipam.json, converted)")
	return fs
}

// ipamCommands are the commands of "ipam".
var ipamCommands = []string{"check", "checkpoint", "conflicts", "release"}

// ipamCommand runs "ipam ...".
func ipamCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	switch {
	case len(args) == 0 || args[0] == "--" || (strings.HasPrefix(args[0], "-") && !isHelp(args[0])):
		return showCommand(ctx, g, args, cio)
	case isHelp(args[0]):
		return &helpRequest{usage: ipamUsage}
	case args[0] == "checkpoint":
		return checkpointCommand(ctx, g, args[1:], cio)
	case args[0] == "conflicts":
		return conflictsCommand(ctx, g, args[1:], cio)
	case args[0] == "check":
		return checkCommand(ctx, g, args[1:], cio)
	case args[0] == "release":
		return releaseCommand(ctx, g, args[1:], cio)
	}
	return showCommand(ctx, g, args, cio)
}

// checkpointCommand runs "ipam checkpoint ...".
func checkpointCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	switch {
	case len(args) == 0:
		return &usageError{msg: "ipam checkpoint: no command given (the commands: export, import)", usage: checkpointUsage}
	case isHelp(args[0]):
		return &helpRequest{usage: checkpointUsage}
	case args[0] == "export":
		return exportCommand(ctx, g, args[1:], cio)
	case args[0] == "import":
		return importCommand(ctx, g, args[1:], cio)
	}
	return &usageError{msg: fmt.Sprintf("ipam checkpoint: unknown command %q (the commands: export, import)", args[0]), usage: checkpointUsage}
}

// exportCommand: GET the document, check it, write it.
func exportCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	var out string
	fs := exportFlags(&out)
	if err := parseFlags(fs, args, exportUsage); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("ipam checkpoint export: unexpected argument %q (write to a file with -o file, before it)", fs.Arg(0)), usage: exportUsage}
	}
	c, err := newClient(g, exportUsage)
	if err != nil {
		return err
	}
	doc, err := c.do(ctx, http.MethodGet, checkpointPath, nil, nil)
	if err != nil {
		return fmt.Errorf("ipam checkpoint export: %w", err)
	}
	if len(doc) > maxDocument {
		return fmt.Errorf("ipam checkpoint export: the document is longer than %d bytes, the most an agent imports; nothing written", maxDocument)
	}
	d, err := checkpoint.Decode(doc)
	newer := errors.Is(err, checkpoint.ErrNewerVersion)
	if err != nil && !newer {
		return fmt.Errorf("ipam checkpoint export: the agent sent a document this contiv-netctl cannot read; nothing written: %w", err)
	}
	toStdout := out == "" || out == "-"
	if toStdout {
		if _, err := cio.stdout.Write(doc); err != nil {
			return fmt.Errorf("ipam checkpoint export: writing to stdout: %w", err)
		}
	} else if err := writeFileAtomic(out, doc, 0o600); err != nil {
		return fmt.Errorf("ipam checkpoint export: %w", err)
	}
	report := cio.stdout
	where := out
	if toStdout {
		report, where = cio.stderr, "stdout"
	}
	if newer {
		_, _ = fmt.Fprintf(cio.stderr, "contiv-netctl: warning: wrote the document to %s, but this contiv-netctl cannot import it: %v\n", where, err)
		return nil
	}
	_, _ = fmt.Fprintf(report, "exported %d allocations of node %q (taken at %s) to %s\n",
		len(d.Allocations), d.Node, d.TakenAt.Format(time.RFC3339), where)
	return nil
}

// importCommand: read the document, check it, POST it, print the counts.
func importCommand(ctx context.Context, g *globals, args []string, cio *cmdIO) error {
	var replace bool
	var from string
	fs := importFlags(&replace, &from)
	if err := parseFlags(fs, args, importUsage); err != nil {
		return err
	}
	if err := checkFrom(from); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		return &usageError{msg: "ipam checkpoint import: no file given (- reads stdin)", usage: importUsage}
	case 1:
	default:
		return &usageError{msg: fmt.Sprintf("ipam checkpoint import: %d arguments %q: want one file (and -replace before it)", fs.NArg(), fs.Args()), usage: importUsage}
	}
	c, err := newClient(g, importUsage)
	if err != nil {
		return err
	}
	name := fs.Arg(0)
	raw, err := readInput(name, cio.stdin, "an agent imports")
	if err != nil {
		return fmt.Errorf("ipam checkpoint import: %w", err)
	}
	doc, err := importDocument(from, name, raw)
	if err != nil {
		return fmt.Errorf("ipam checkpoint import: %w", err)
	}
	q := url.Values{"replace": {fmt.Sprint(replace)}}
	reply, err := c.do(ctx, http.MethodPost, checkpointPath, q, doc.send)
	if err != nil {
		return fmt.Errorf("ipam checkpoint import: %s: %w", doc.brief, err)
	}
	var res importReply
	if err := json.Unmarshal(reply, &res); err != nil {
		return fmt.Errorf("ipam checkpoint import: the agent's reply %q: %w", cut(string(reply)), err)
	}
	_, _ = fmt.Fprintf(cio.stdout, "imported %d allocations, skipped %d (from %s)\n", res.Imported, res.Skipped, doc.what)
	for _, r := range res.SkippedReasons {
		_, _ = fmt.Fprintf(cio.stdout, "skipped: %s\n", r)
	}
	return nil
}

// readInput reads a file, or stdin for "-", refusing more than
// maxDocument bytes, the most that what reads ("an agent imports").
func readInput(name string, stdin io.Reader, what string) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		r = f
	} else {
		name = "stdin"
	}
	doc, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(doc) > maxDocument {
		return nil, fmt.Errorf("%s: longer than %d bytes, the most %s", name, maxDocument, what)
	}
	return doc, nil
}
