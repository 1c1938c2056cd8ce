package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// nodes are the node names of the two agents.
var nodes = []string{"demo-node-1", "demo-node-2"}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run parses the flags, runs the demo until SIGINT or SIGTERM and returns
// the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", filepath.Join(kubeenv.RepoRoot(), "bin"), "directory of contiv-agent and contiv-ksr (make build)")
	dir := fs.String("dir", "", "data directory, kept at exit (default: a new temporary directory, removed at exit)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{out: stdout, dir: *dir}
	err := d.run(ctx, *bin)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil // stopped while starting
	}
	err = errors.Join(err, d.stop())
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	_, _ = fmt.Fprintln(stdout, "stopped: every process the demo started has ended")
	return 0
}

// demo is one run; the main goroutine owns it.
type demo struct {
	out       io.Writer
	dir       string
	removeDir bool
	kube      *kubeenv.Env
	cluster   *cluster.Cluster
}

// run starts everything, fills the API, prints the agents' view and waits
// for ctx to end.
func (d *demo) run(ctx context.Context, bin string) error {
	bins, err := cluster.BinsIn(bin)
	if err != nil {
		return err
	}
	if err := d.makeDir(); err != nil {
		return err
	}
	d.printf("data directory: %s\n", d.dir)
	if err := d.start(ctx, bins); err != nil {
		return err
	}
	subnets, err := d.subnets(ctx)
	if err != nil {
		return err
	}
	pods := demoPods(subnets)
	if err := d.populate(ctx, pods); err != nil {
		return err
	}
	if err := d.report(ctx, pods); err != nil {
		return err
	}
	d.printf("ready: Ctrl-C (SIGINT) or SIGTERM stops everything\n")
	<-ctx.Done()
	d.printf("stopping\n")
	return nil
}

// makeDir creates a temporary data directory unless -dir named one.
func (d *demo) makeDir() error {
	if d.dir != "" {
		return os.MkdirAll(d.dir, 0o700)
	}
	dir, err := os.MkdirTemp("", "contiv-demo-")
	d.dir, d.removeDir = dir, err == nil
	return err
}

// start runs the API server, the Contiv etcd, contiv-ksr and the agents.
func (d *demo) start(ctx context.Context, bins cluster.Bins) error {
	kube, err := kubeenv.Start(d.dir)
	if err != nil {
		return err
	}
	d.kube = kube
	d.printf("API server:     %s\nkubeconfig:     %s\nkubectl:        %s --kubeconfig %s get nodes,pods -o wide\n",
		kube.Config.Host, kube.Kubeconfig, kube.Kubectl, kube.Kubeconfig)
	if d.cluster, err = cluster.Start(ctx, filepath.Join(d.dir, "cluster"), bins, kube.Kubeconfig); err != nil {
		return err
	}
	d.printf("Contiv etcd:    %s (pid %d)\n", d.cluster.Etcd.Endpoint, d.cluster.Etcd.PID())
	k, err := d.cluster.AddKSR(ctx, ksr.Config{})
	if err != nil {
		return err
	}
	d.printf("contiv-ksr:     %s%s (pid %d)\n", k.REST, ksr.StatusPath, k.PID())
	for _, n := range nodes {
		a, err := d.cluster.AddAgent(ctx, cluster.AgentOptions{Node: n})
		if err != nil {
			return err
		}
		d.printf("agent %s: %s/ (pid %d, CNI socket %s)\n", n, a.REST, a.PID(), a.Socket)
	}
	return nil
}

// stop stops the cluster, then the API server, and removes a temporary
// data directory.
func (d *demo) stop() error {
	var errs []error
	if d.cluster != nil {
		errs = append(errs, d.cluster.Stop())
	}
	if d.kube != nil {
		errs = append(errs, d.kube.Stop())
	}
	if d.removeDir {
		errs = append(errs, os.RemoveAll(d.dir))
	}
	return errors.Join(errs...)
}

func (d *demo) printf(format string, args ...any) { _, _ = fmt.Fprintf(d.out, format, args...) }
