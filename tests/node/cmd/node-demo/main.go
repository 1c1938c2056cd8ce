//go:build node

// Command node-demo (`make node-demo`) brings a real node up on this
// machine (tests/node: envtest's kube-apiserver, kube-scheduler,
// kube-controller-manager, the Contiv etcd, contiv-ksr, contiv-agent,
// containerd with ptp and contiv-cni, kubelet), runs a Deployment of
// busybox pods, prints the node, the pods with their IPs and the agent's
// allocations side by side, then stops everything and removes what it
// left (node.Demo does the work). It runs as root, after `make build`
// and `make node-bins`.
//
// Owner: the main goroutine owns the node; the signal context only
// cancels.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/contiv-ipam/agent/tests/kubeenv"
	"github.com/contiv-ipam/agent/tests/node"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run parses the flags, runs the demo and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("node-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", filepath.Join(kubeenv.RepoRoot(), "bin"), "directory of contiv-agent, contiv-ksr and contiv-cni (make build)")
	dir := fs.String("dir", "", "data directory, kept at exit (default: a new temporary directory, removed at exit)")
	replicas := fs.Int("replicas", 20, "pods of the Deployment")
	hold := fs.Bool("hold", false, "keep the node running after the report, until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bins, err := node.FindBins(*bin)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "node-demo:", err)
		return 1
	}
	data := *dir
	if data == "" {
		if data, err = os.MkdirTemp("", "contiv-node-demo-"); err != nil {
			_, _ = fmt.Fprintln(stderr, "node-demo:", err)
			return 1
		}
		defer func() { _ = os.RemoveAll(data) }()
	} else if err := os.MkdirAll(data, 0o700); err != nil {
		_, _ = fmt.Fprintln(stderr, "node-demo:", err)
		return 1
	}
	o := node.DemoOptions{Replicas: int32(*replicas)}
	if *hold {
		o.Hold = ctx.Done()
	}
	if err := node.Demo(ctx, stdout, data, bins, o); err != nil {
		_, _ = fmt.Fprintln(stderr, "node-demo:", err)
		return 1
	}
	return 0
}
