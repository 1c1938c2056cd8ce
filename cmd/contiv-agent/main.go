// Command contiv-agent runs the vswitch agent: every plugin of
// ContivAgent, configured by the <plugin>.conf files found in -config-dir
// (env CONFIG_DIR), until SIGINT or SIGTERM.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/logging"
)

// Set by the linker (see the Makefile).
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

// Environment variables read by main itself.
const (
	envStartTimeout = "START_TIMEOUT"
	envStopTimeout  = "STOP_TIMEOUT"
	envLogFormat    = "LOG_FORMAT"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// run builds and runs the agent; it returns the process exit code.
func run(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	fs := flag.NewFlagSet("contiv-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	showVersion := fs.Bool("version", false, "print the version and exit")
	reg, err := newLogRegistry(stderr, env)
	if err != nil {
		return fail(stderr, err)
	}
	opts, err := agentOptions(fs, args, env)
	if err != nil {
		return fail(stderr, err)
	}
	build := health.BuildInfo{Version: version, Commit: commit, Date: buildDate}
	root := newContivAgent(reg, build)
	a, err := agent.NewAgent(append(opts, agent.AllPlugins(root), agent.Logger(reg.Logger("agent")))...)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(stderr, err)
	}
	if *showVersion {
		_, _ = fmt.Fprintf(stdout, "contiv-agent %s (commit %s, built %s)\n", version, commit, buildDate)
		return 0
	}
	if err := a.Run(); err != nil {
		return fail(stderr, err)
	}
	return 0
}

// agentOptions returns the command line, version and timeouts for the agent.
func agentOptions(fs *flag.FlagSet, args []string, env func(string) (string, bool)) ([]agent.Option, error) {
	opts := []agent.Option{agent.FlagSet(fs), agent.Args(args), agent.Version(version, buildDate, commit)}
	start, err := envDuration(env, envStartTimeout, agent.DefaultStartTimeout)
	if err != nil {
		return nil, err
	}
	stop, err := envDuration(env, envStopTimeout, agent.DefaultStopTimeout)
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
	switch format, _ := env(envLogFormat); format {
	case "", "text":
	case "json":
		opts = append(opts, logging.WithJSON())
	default:
		return nil, fmt.Errorf("env %s=%q: want text or json", envLogFormat, format)
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

func fail(stderr io.Writer, err error) int {
	_, _ = fmt.Fprintf(stderr, "contiv-agent: %v\n", err)
	return 1
}
