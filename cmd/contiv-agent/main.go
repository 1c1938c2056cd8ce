// Command contiv-agent runs the vswitch agent: every plugin of
// ContivAgent, configured by the <plugin>.conf files found in -config-dir
// (env CONFIG_DIR), until SIGINT or SIGTERM.
package main

import (
	"io"
	"os"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/command"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/logging"
)

// Set by the linker (see the Makefile).
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// run builds and runs the agent; it returns the process exit code.
func run(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	spec := command.Spec{Name: pluginName, Version: version, Commit: commit, Date: buildDate,
		Root: func(reg *logging.Registry, build health.BuildInfo) infra.Plugin { return newContivAgent(reg, build) }}
	return command.Run(spec, args, stdout, stderr, env)
}
