package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// cmdIO is what a command reads and writes: its standard streams and
// environment, the clock relative times are rendered against, and
// whether stdout is a terminal (colour with -color auto).
type cmdIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	env            func(string) (string, bool)
	now            func() time.Time
	tty            bool
}

// usageError is a command line that cannot run: why, and the usage of the
// command it was meant for (run prints both on stderr and exits 2).
type usageError struct {
	msg   string
	usage func(w io.Writer)
}

func (e *usageError) Error() string { return e.msg }

// helpRequest is -h (or -help): run prints the usage on stdout and exits 0.
type helpRequest struct{ usage func(w io.Writer) }

func (*helpRequest) Error() string { return "help requested" }

// Environment variables of the global flags.
const (
	envServer = "CONTIV_NETCTL_SERVER"
	envUser   = "CONTIV_NETCTL_USER"
	// envEtcd, then envEtcdctl, name the etcd endpoints when -etcd does
	// not.
	envEtcd    = "CONTIV_NETCTL_ETCD"
	envEtcdctl = "ETCDCTL_ENDPOINTS"
	// envNoColor turns colour off under -color auto (https://no-color.org).
	envNoColor = "NO_COLOR"
)

// defaultServer is the agent's REST server with http.conf's defaults.
const defaultServer = "http://127.0.0.1:9999"

// defaultEtcd is the client URL of the embedded etcd of `make run`
// (conf/etcd.conf embedded-client-url, the etcd plugin's default).
const defaultEtcd = "http://127.0.0.1:2379"

// commandNames are the top-level commands.
var commandNames = []string{"nodes", "pods", "ipam", "completion"}

// globals are the global flags.
type globals struct {
	server, user      string
	cacert, cert, key string
	timeout           time.Duration
	version           bool
	// etcd are the etcd endpoints (comma-separated), with the TLS files
	// of an https etcd.
	etcd                          string
	etcdCACert, etcdCert, etcdKey string
	color                         string
	// serverFrom, userFrom and etcdFrom say where server, user and etcd
	// came from ("-server", "env CONTIV_NETCTL_SERVER", "the default"),
	// for errors.
	serverFrom, userFrom, etcdFrom string
}

// globalFlags is the flag set of the global flags, bound to g.
func globalFlags(g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet("contiv-netctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.server, "server", defaultServer, "the agent's REST server `url`: http://host:port or https://host:port (env "+envServer+")")
	fs.StringVar(&g.user, "user", "", "HTTP basic authentication as `user:password` (env "+envUser+"; the environment keeps the password out of ps)")
	fs.StringVar(&g.cacert, "cacert", "", "CA certificate `file` (PEM) that signed an https server's certificate (default: the system's CAs)")
	fs.StringVar(&g.cert, "cert", "", "client certificate `file` (PEM) for a server that requires one (with -key)")
	fs.StringVar(&g.key, "key", "", "private key `file` (PEM) of -cert")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "bound of each request to an agent and of each etcd read, a `duration` such as 30s or 2m")
	fs.StringVar(&g.etcd, "etcd", defaultEtcd, "the etcd `endpoints` of the cluster, comma-separated: http://host:port, https://host:port or host:port (env "+envEtcd+", then "+envEtcdctl+"; nodes, pods, ipam NODE)")
	fs.StringVar(&g.etcdCACert, "etcd-cacert", "", "CA certificate `file` (PEM) that signed an https etcd's certificate")
	fs.StringVar(&g.etcdCert, "etcd-cert", "", "client certificate `file` (PEM) for etcd (with -etcd-key)")
	fs.StringVar(&g.etcdKey, "etcd-key", "", "private key `file` (PEM) of -etcd-cert")
	fs.StringVar(&g.color, "color", "auto", "colour the tables: `when`: auto (stdout a terminal and "+envNoColor+" unset), always, never")
	fs.BoolVar(&g.version, "version", false, "print the version and exit")
	return fs
}

// mainUsage is the usage of contiv-netctl.
func mainUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] <command> ...

contiv-netctl reads the cluster from etcd and talks to the contiv-agents over their REST API.

Commands:
  nodes [-o table|wide|json|yaml|name]       every node of the cluster from etcd: ID, name,
                                             addresses, pod CIDRs and blocks, pods used and
                                             total, agent ready or stale, presence lease
  pods [-node N] [-namespace NS] [-o ...]    every pod allocation, asked of each agent (or
                                             of node N's): pod, IPs, node, container, age
  ipam [-o table|wide|json|yaml] [NODE]      the node's IPAM: node ID, pod subnets, gateway,
                                             NAT loopback, VXLAN, interconnect; pools with
                                             fill bars, cooldowns, reservations, release
                                             candidates (the agent at -server, or NODE's)
  ipam check [-o table|json]                 list the pods holding addresses that the
                                             Kubernetes state lacks (release candidates);
                                             -o json: as a report to save and review
  ipam release -from-report file             release the addresses a report of ipam check
                                             lists, each only if its pod still holds it
  ipam checkpoint export [-o file]           save every allocation of the agent's node
                                             to a checkpoint file (default: stdout)
  ipam checkpoint import [-replace] file|-   restore the allocations of a checkpoint
                                             file (- : stdin) on the agent's node
  ipam checkpoint import -from aws-vpc-cni [-replace] file|-
                                             the same from the AWS VPC CNI's checkpoint
                                             (its ipam.json), converted: a node moving
                                             from the AWS VPC CNI keeps its pods' addresses
  ipam conflicts [list]                      list the stored allocation records the agent
                                             moved aside (an address clash, outside its pools)
  ipam conflicts restore NAME                put the record moved aside as NAME back
  ipam conflicts discard NAME                delete the record moved aside as NAME
  completion bash|zsh                        print a shell completion script

Global flags:
`)
	printDefaults(w, globalFlags(&globals{}))
	_, _ = fmt.Fprint(w, `
Exit codes: 0 done, 1 the command failed (the reason on stderr), 2 usage error.
"contiv-netctl <command> -h" describes a command.
`)
}

// printDefaults writes the flags of fs as flag.PrintDefaults does.
func printDefaults(w io.Writer, fs *flag.FlagSet) {
	var b bytes.Buffer
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	_, _ = w.Write(b.Bytes())
}

// dispatch parses the global flags and runs the command.
func dispatch(ctx context.Context, args []string, cio *cmdIO) error {
	var g globals
	fs := globalFlags(&g)
	if err := parseFlags(fs, args, mainUsage); err != nil {
		return err
	}
	if g.version {
		_, _ = fmt.Fprintf(cio.stdout, "contiv-netctl %s (commit %s, built %s)\n", version, commit, buildDate)
		return nil
	}
	g.serverFrom, g.userFrom = "the default", ""
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["server"] {
		g.serverFrom = "-server"
	} else if v, ok := cio.env(envServer); ok && v != "" {
		g.server, g.serverFrom = v, "env "+envServer
	}
	if set["user"] {
		g.userFrom = "-user"
	} else if v, ok := cio.env(envUser); ok && v != "" {
		g.user, g.userFrom = v, "env "+envUser
	}
	g.etcdFrom = "the default"
	if set["etcd"] {
		g.etcdFrom = "-etcd"
	} else if v, ok := cio.env(envEtcd); ok && v != "" {
		g.etcd, g.etcdFrom = v, "env "+envEtcd
	} else if v, ok := cio.env(envEtcdctl); ok && v != "" {
		g.etcd, g.etcdFrom = v, "env "+envEtcdctl
	}
	switch g.color {
	case "auto", "always", "never":
	default:
		return &usageError{msg: fmt.Sprintf("-color %q: want auto, always or never", g.color), usage: mainUsage}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return &usageError{msg: "no command given", usage: mainUsage}
	}
	switch rest[0] {
	case "nodes":
		return nodesCommand(ctx, &g, rest[1:], cio)
	case "pods":
		return podsCommand(ctx, &g, rest[1:], cio)
	case "ipam":
		return ipamCommand(ctx, &g, rest[1:], cio)
	case "completion":
		return completionCommand(rest[1:], cio)
	case "help":
		return &helpRequest{usage: mainUsage}
	}
	return &usageError{msg: fmt.Sprintf("unknown command %q (the commands: %s)", rest[0], strings.Join(commandNames, ", ")), usage: mainUsage}
}

// parseFlags parses args into fs; -h is a helpRequest, a bad flag a
// usageError with usage.
func parseFlags(fs *flag.FlagSet, args []string, usage func(io.Writer)) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return &helpRequest{usage: usage}
	}
	return &usageError{msg: err.Error(), usage: usage}
}

// isHelp tells whether arg asks for help in the place of a command name.
func isHelp(arg string) bool {
	switch strings.TrimLeft(arg, "-") {
	case "h", "help":
		return true
	}
	return false
}
