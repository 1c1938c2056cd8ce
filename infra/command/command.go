// Package command runs a binary built on the framework: it reads the
// logging and timeout environment, parses the command line (the plugins'
// flags, -version), builds the agent around the command's top-level
// plugin and runs it until SIGINT or SIGTERM. contiv-agent and contiv-ksr
// are two such binaries; their main functions only describe themselves
// with a Spec.
//
// Caller duties: call Run from main with os.Args[1:], os.Stdout,
// os.Stderr and os.LookupEnv, and exit with the code it returns. Run
// never exits the process itself.
package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/logging"
)

// Environment variables read by Run itself.
const (
	EnvStartTimeout = "START_TIMEOUT"
	EnvStopTimeout  = "STOP_TIMEOUT"
	EnvLogFormat    = "LOG_FORMAT"
)

// Spec describes one binary.
type Spec struct {
	// Name is the binary's name (the flag set's and the error prefix).
	Name string
	// Version, Commit and Date are set by the linker (see the Makefile).
	Version, Commit, Date string
	// Root builds the top-level plugin, every plugin wired to reg.
	Root func(reg *logging.Registry, build health.BuildInfo) infra.Plugin
}

// Run builds and runs the agent of s; it returns the exit code: 0 after a
// clean stop, -version or -h; 1 on any error, which it prints to stderr.
func Run(s Spec, args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	fs := flag.NewFlagSet(s.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	showVersion := fs.Bool("version", false, "print the version and exit")
	reg, err := newLogRegistry(stderr, env)
	if err != nil {
		return fail(s, stderr, err)
	}
	opts, err := agentOptions(s, fs, args, env)
	if err != nil {
		return fail(s, stderr, err)
	}
	root := s.Root(reg, health.BuildInfo{Version: s.Version, Commit: s.Commit, Date: s.Date})
	a, err := agent.NewAgent(append(opts, agent.AllPlugins(root), agent.Logger(reg.Logger("agent")))...)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(s, stderr, err)
	}
	if *showVersion {
		_, _ = fmt.Fprintf(stdout, "%s %s (commit %s, built %s)\n", s.Name, s.Version, s.Commit, s.Date)
		return 0
	}
	if err := a.Run(); err != nil {
		return fail(s, stderr, err)
	}
	return 0
}

// agentOptions returns the command line, version and timeouts for the agent.
func agentOptions(s Spec, fs *flag.FlagSet, args []string, env func(string) (string, bool)) ([]agent.Option, error) {
	opts := []agent.Option{agent.FlagSet(fs), agent.Args(args), agent.Version(s.Version, s.Date, s.Commit)}
	start, err := envDuration(env, EnvStartTimeout, agent.DefaultStartTimeout)
	if err != nil {
		return nil, err
	}
	stop, err := envDuration(env, EnvStopTimeout, agent.DefaultStopTimeout)
	if err != nil {
		return nil, err
	}
	return append(opts, agent.StartTimeout(start), agent.StopTimeout(stop)), nil
}

// envDuration reads a positive duration such as "30s" from env name.
func envDuration(env func(string) (string, bool), name string, def time.Duration) (time.Duration, error) {
	v, ok := env(name)
	if !ok || v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("env %s=%q: want a positive duration such as \"30s\"", name, v)
	}
	return d, nil
}

// newLogRegistry builds the registry every plugin logs through: text or
// JSON (LOG_FORMAT) on stderr, level from INITIAL_LOGLVL (default info).
func newLogRegistry(out io.Writer, env func(string) (string, bool)) (*logging.Registry, error) {
	opts := []logging.Option{logging.WithOutput(out)}
	switch format, _ := env(EnvLogFormat); format {
	case "", "text":
	case "json":
		opts = append(opts, logging.WithJSON())
	default:
		return nil, fmt.Errorf("env %s=%q: want text or json", EnvLogFormat, format)
	}
	if v, ok := env(logging.EnvInitialLevel); ok && v != "" {
		lvl, err := logging.ParseLevel(v)
		if err != nil {
			return nil, fmt.Errorf("env %s=%q: %w", logging.EnvInitialLevel, v, err)
		}
		opts = append(opts, logging.WithLevel(lvl))
	}
	return logging.NewRegistry(opts...), nil
}

func fail(s Spec, stderr io.Writer, err error) int {
	_, _ = fmt.Fprintf(stderr, "%s: %v\n", s.Name, err)
	return 1
}
