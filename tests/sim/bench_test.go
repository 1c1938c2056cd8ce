package sim_test

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/tests/sim"
)

// benchNodesEnv lists the sizes BenchmarkSim runs (default "100,300").
const benchNodesEnv = "SIM_BENCH_NODES"

// BenchmarkSim runs the simulation once per size, for the benchmark
// report (BENCHMARKS.md): a cold start of every node at once, 10 s idle,
// a churn of 1,000 pod creations and deletions at 50 per second, and the
// etcd leader killed for 10 s under 500 more. b.N is ignored: each size
// is one run (use -benchtime 1x). Figures are reported, not asserted,
// except that a run that breaks an invariant (a duplicate ID, a pod
// change lost or seen by another node, an allocation that disagrees)
// fails.
func BenchmarkSim(b *testing.B) {
	sizes := os.Getenv(benchNodesEnv)
	if sizes == "" {
		sizes = "100,300"
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			b.Fatalf("%s %q: want sizes of at least 2", benchNodesEnv, sizes)
		}
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchSize(b, n) })
	}
}

// benchSize is one size of BenchmarkSim.
func benchSize(b *testing.B, n int) {
	if _, err := sim.RaiseFileLimit(); err != nil {
		b.Logf("file limit: %v", err)
	}
	ctx := b.Context()
	// As make sim runs them: a dial timeout of 10 s (the agent's default
	// is 1 s), which a herd of first connections on 2 shared cores needs.
	s, err := sim.Start(ctx, sim.Config{Dir: b.TempDir(), Log: io.Discard, Node: sim.NodeOptions{DialTimeout: 10 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	}()
	for b.Loop() {
		cold, err := sim.RunColdStart(ctx, s, n, 15*time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if len(cold.Duplicates) > 0 {
			b.Fatalf("duplicate node IDs: %v", cold.Duplicates)
		}
		idle, err := sim.RunIdle(ctx, s, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		churn := sim.ChurnConfig{Ops: 1000, Rate: 50, Workers: 32, PodsPerNode: 2}
		ch, err := sim.RunChurn(ctx, s, churn)
		if err != nil {
			b.Fatal(err)
		}
		if len(ch.Problems) > 0 || ch.Lost > 0 {
			b.Fatalf("churn: %d changes lost, invariants broken: %v", ch.Lost, ch.Problems)
		}
		churn.Ops = 500
		kill, err := sim.RunKill(ctx, s, sim.KillConfig{Down: 10 * time.Second, Churn: churn, KillAfter: 2500 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		report(b, cold, idle, ch, kill)
	}
}

// report reports one size's figures.
func report(b *testing.B, cold *sim.ColdStart, idle sim.Usage, ch *sim.Churn, kill *sim.Kill) {
	ops := float64(max(ch.Creates+ch.Deletes, 1))
	for _, m := range []struct {
		v    float64
		unit string
	}{
		{cold.AllReadyMs / 1000, "all-ready-s"},
		{cold.PerNode.P50 / 1000, "ready-p50-s"},
		{cold.PerNode.P99 / 1000, "ready-p99-s"},
		{float64(cold.Restarts), "restarts"},
		{float64(cold.MaxID), "max-id"},
		{cold.Usage.CPUPerNodeMs, "cold-cpu-ms/node"},
		{cold.Usage.EtcdTotal.WatchEvents, "cold-etcd-events"},
		{cold.Usage.EtcdTotal.SentMiB, "cold-etcd-MiB"},
		{idle.RSSPerNodeKiB / 1024, "idle-MiB/node"},
		{idle.HeapPerNodeKiB / 1024, "idle-heap-MiB/node"},
		{idle.CPUPerNodeMs / max(idle.Seconds, 1e-9), "idle-cpu-ms/s/node"},
		{ch.Latency.P50, "change-p50-ms"},
		{ch.Latency.P99, "change-p99-ms"},
		{ch.Usage.EtcdTotal.WatchEvents / ops, "events/change"},
		{ch.Usage.EtcdTotal.SentMiB * 1024 / ops, "etcd-KiB/change"},
		{kill.Churn.Latency.P99, "kill-change-p99-ms"},
	} {
		b.ReportMetric(m.v, m.unit)
	}
}
