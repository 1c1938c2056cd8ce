// Command contiv-ksr is the Kubernetes state reflector: it mirrors the
// Nodes, Pods and Namespaces of the API server into etcd for the agents,
// configured by the <plugin>.conf files found in -config-dir (env
// CONFIG_DIR: ksr.conf, etcd.conf, http.conf, ...), until SIGINT or
// SIGTERM. Several replicas may run; one leads and writes.
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

// run builds and runs contiv-ksr; it returns the process exit code.
func run(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	spec := command.Spec{Name: pluginName, Version: version, Commit: commit, Date: buildDate,
		Root: func(reg *logging.Registry, build health.BuildInfo) infra.Plugin { return newContivKSR(reg, build) }}
	return command.Run(spec, args, stdout, stderr, env)
}
