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
// environment.
type cmdIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	env            func(string) (string, bool)
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
)

// defaultServer is the agent's REST server with http.conf's defaults.
const defaultServer = "http://127.0.0.1:9999"

// globals are the global flags.
type globals struct {
	server, user      string
	cacert, cert, key string
	timeout           time.Duration
	version           bool
	// serverFrom and userFrom say where server and user came from
	// ("-server", "env CONTIV_NETCTL_SERVER", "the default"), for errors.
	serverFrom, userFrom string
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
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "bound of each request to the server, a `duration` such as 30s or 2m")
	fs.BoolVar(&g.version, "version", false, "print the version and exit")
	return fs
}

// mainUsage is the usage of contiv-netctl.
func mainUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl [global flags] <command> ...

contiv-netctl talks to a contiv-agent over its REST API.

Commands:
  ipam check [-o table|json]                 list the pods holding addresses that the
                                             Kubernetes state lacks (release candidates);
                                             -o json: as a report to save and review
  ipam release -from-report file             release the addresses a report of ipam check
                                             lists, each only if its pod still holds it
  ipam checkpoint export [-o file]           save every allocation of the agent's node
                                             to a checkpoint file (default: stdout)
  ipam checkpoint import [-replace] file|-   restore the allocations of a checkpoint
                                             file (- : stdin) on the agent's node
  ipam conflicts [list]                      list the stored allocation records the agent
                                             moved aside (an address clash, outside its pools)
  ipam conflicts restore NAME                put the record moved aside as NAME back
  ipam conflicts discard NAME                delete the record moved aside as NAME

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
	rest := fs.Args()
	if len(rest) == 0 {
		return &usageError{msg: "no command given", usage: mainUsage}
	}
	switch rest[0] {
	case "ipam":
		return ipamCommand(ctx, &g, rest[1:], cio)
	case "help":
		return &helpRequest{usage: mainUsage}
	}
	return &usageError{msg: fmt.Sprintf("unknown command %q (the commands: ipam)", rest[0]), usage: mainUsage}
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
