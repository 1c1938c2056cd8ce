// Command sim runs the cluster simulation of tests/sim at one or more
// sizes (`make sim SIM_NODES=100,500`): for each N a fresh 3-member etcd
// and N nodes, then the scenarios in order (cold start, idle, churn,
// replacement, leader kill). It prints a table with one column per N and
// writes the reports as JSON (-json). A size that fails stops there; the
// failure is in its column and the larger sizes are not run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/contiv-ipam/agent/tests/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sim:", err)
		os.Exit(1)
	}
}

type flags struct {
	nodes        string
	dir          string
	jsonOut      string
	logOut       string
	scenarios    string
	readyTimeout time.Duration
	idle         time.Duration
	churn        sim.ChurnConfig
	replace      sim.ReplaceConfig
	killDown     time.Duration
	killOps      int
	node         sim.NodeOptions
	marker       time.Duration
	startRate    float64
}

func parse() (*flags, error) {
	f := &flags{}
	flag.StringVar(&f.nodes, "nodes", "100", "comma-separated sizes N to run, each on a fresh etcd cluster (ascending; a failure stops the larger ones)")
	flag.StringVar(&f.dir, "dir", "", "working directory (etcd data, bolt files); default a new directory under $TMPDIR, removed at the end")
	flag.StringVar(&f.jsonOut, "json", "", "write the reports as JSON to this file")
	flag.StringVar(&f.logOut, "log", "", "the agents' warnings and errors go to this file (default <dir>/sim.log)")
	flag.StringVar(&f.scenarios, "scenarios", "cold,idle,churn,replace,kill", "scenarios to run, in this order (cold always runs)")
	flag.DurationVar(&f.readyTimeout, "ready-timeout", 10*time.Minute, "cold start: how long to wait for every node to be ready")
	flag.DurationVar(&f.idle, "idle", 20*time.Second, "idle: how long to measure the nodes doing nothing")
	flag.IntVar(&f.churn.Ops, "churn-ops", 2000, "churn: pod creations and deletions")
	flag.Float64Var(&f.churn.Rate, "churn-rate", 50, "churn: ops per second (0: as fast as the workers go)")
	flag.IntVar(&f.churn.Workers, "churn-workers", 32, "churn: ops in flight at most")
	flag.IntVar(&f.churn.PodsPerNode, "pods-per-node", 2, "churn: the population aimed at, per node")
	flag.Float64Var(&f.replace.PerMinute, "replace-per-minute", 0.01, "replace: share of the nodes replaced per minute")
	flag.DurationVar(&f.replace.Duration, "replace-duration", 2*time.Minute, "replace: how long (at least one replacement)")
	flag.DurationVar(&f.killDown, "kill-down", 10*time.Second, "kill: how long the killed leader stays down")
	flag.IntVar(&f.killOps, "kill-ops", 1000, "kill: churn ops during the kill (at -churn-rate)")
	flag.DurationVar(&f.node.DialTimeout, "dial-timeout", 10*time.Second, "etcd.conf dial-timeout of every node (the agent's default is 1s)")
	flag.IntVar(&f.node.EndpointsPerNode, "endpoints-per-node", 0, "members each node's client lists (0: all 3)")
	flag.BoolVar(&f.node.NoEventHistory, "no-event-history", false, "turn the controller's event history off")
	flag.Float64Var(&f.startRate, "start-rate", 0, "cold start: agents started per second (0: every one at once)")
	flag.DurationVar(&f.marker, "marker-interval", 10*time.Second, "the mirror marker's heartbeat")
	flag.Parse()
	return f, nil
}

func run() error {
	f, err := parse()
	if err != nil {
		return err
	}
	var sizes []int
	for _, s := range strings.Split(f.nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			return fmt.Errorf("-nodes %q: want sizes of at least 2", f.nodes)
		}
		sizes = append(sizes, n)
	}
	want := make(map[string]bool)
	for _, s := range strings.Split(f.scenarios, ",") {
		want[strings.TrimSpace(s)] = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := f.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "contiv-sim-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
	}
	logPath := f.logOut
	if logPath == "" {
		logPath = filepath.Join(dir, "sim.log")
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	var reports []sim.Report
	for _, n := range sizes {
		fmt.Fprintf(os.Stderr, "== N=%d\n", n)
		r := runSize(ctx, f, want, n, filepath.Join(dir, fmt.Sprintf("n%d", n)), logf)
		reports = append(reports, r)
		if err := sim.WriteTable(os.Stdout, reports[len(reports)-1:]); err != nil {
			return err
		}
		if f.jsonOut != "" {
			if err := writeJSON(f.jsonOut, reports); err != nil {
				return err
			}
		}
		if r.Failure != "" || ctx.Err() != nil {
			break
		}
		_ = os.RemoveAll(filepath.Join(dir, fmt.Sprintf("n%d", n)))
	}
	fmt.Println()
	fmt.Println("== every size (figures indicative: the nodes, the 3 etcd members and contiv-ksr share the machine's CPUs)")
	return errors.Join(sim.WriteTable(os.Stdout, reports), ctx.Err())
}

// runSize runs the scenarios at one size on a fresh Sim.
func runSize(ctx context.Context, f *flags, want map[string]bool, n int, dir string, logf *os.File) sim.Report {
	r := sim.Report{Nodes: n}
	r.FileLimit, _ = sim.RaiseFileLimit()
	fail := func(what string, err error) sim.Report {
		r.Failure = what + ": " + err.Error()
		fmt.Fprintln(os.Stderr, "  failed:", r.Failure)
		return r
	}
	s, err := sim.Start(ctx, sim.Config{Dir: dir, Node: f.node, Log: logf, MarkerInterval: f.marker,
		StartRate: f.startRate, Progress: os.Stderr})
	if err != nil {
		return fail("start", err)
	}
	defer func() {
		t := time.Now()
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "  close:", err)
		}
		fmt.Fprintf(os.Stderr, "  closed in %s\n", time.Since(t).Round(time.Millisecond))
	}()
	step := func(name string) { fmt.Fprintf(os.Stderr, "  %s %s\n", time.Now().Format("15:04:05"), name) }
	step("cold start")
	if r.ColdStart, err = sim.RunColdStart(ctx, s, n, f.readyTimeout); err != nil {
		return fail("cold start", err)
	}
	if want["idle"] {
		step("idle")
		u, err := sim.RunIdle(ctx, s, f.idle)
		if err != nil {
			return fail("idle", err)
		}
		r.Idle = &u
	}
	if want["churn"] {
		step("churn")
		if r.Churn, err = sim.RunChurn(ctx, s, f.churn); err != nil {
			return fail("churn", err)
		}
	}
	if want["replace"] {
		step("replace")
		if r.Replace, err = sim.RunReplace(ctx, s, f.replace); err != nil {
			return fail("replace", err)
		}
	}
	if want["kill"] {
		step("kill")
		kc := f.churn
		kc.Ops = f.killOps
		d := time.Duration(float64(kc.Ops) / max(kc.Rate, 1) * float64(time.Second))
		if r.Kill, err = sim.RunKill(ctx, s, sim.KillConfig{Down: f.killDown, Churn: kc, KillAfter: d / 4}); err != nil {
			return fail("kill", err)
		}
	}
	return r
}

func writeJSON(path string, reports []sim.Report) error {
	b, err := json.MarshalIndent(reports, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
