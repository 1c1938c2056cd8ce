package startup

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/tests/bench/internal/agentproc"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// writeConfig writes the agent's config directory dir: testenv's (the
// conf/ samples, REST on a loopback port the kernel chooses, bolt in dir,
// an embedded etcd with its data in dir on loopback ports the kernel
// chooses), with etcd.conf naming endpoint instead when it is set.
func writeConfig(dir, endpoint string) error {
	files, err := testenv.AgentConfig(dir, filepath.Join(dir, "cni.sock"))
	if err != nil {
		return err
	}
	if endpoint != "" {
		files["etcd.conf"] = fmt.Sprintf("endpoints: [%q]\n", endpoint)
	}
	return testenv.WriteConfig(dir, files)
}

// BenchmarkStartToReady: each op execs the agent on a fresh config and
// data directory and waits until /readiness answers 200 (polled every
// agentproc.PollPeriod once the "agent ready" line names the REST port); the agent
// is then stopped (SIGINT), untimed.
//
//   - etcd=embedded: the agent's own embedded etcd (testenv's etcd.conf),
//     a new etcd data directory each time;
//   - etcd=external: an etcd server in this process (etcdtest, the
//     embedded server's code, without fsync) on loopback, started once;
//     each op is a new node name, so each start claims a new node ID.
//
// Reported: ns/op and the "p50-ms" and "p99-ms" (nearest rank) of the
// start-to-ready times.
func BenchmarkStartToReady(b *testing.B) {
	b.Run("etcd=embedded", func(b *testing.B) { benchStarts(b, "") })
	b.Run("etcd=external", func(b *testing.B) {
		srv := etcdtest.Start(b)
		benchStarts(b, srv.Endpoint())
	})
}

// benchStarts times fresh starts on endpoint ("" for the embedded etcd).
func benchStarts(b *testing.B, endpoint string) {
	root := b.TempDir()
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		i := len(lat)
		dir := filepath.Join(root, fmt.Sprintf("start-%d", i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := writeConfig(dir, endpoint); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		a, err := agentproc.Start(dir, fmt.Sprintf("startup-node-%d", i))
		if err == nil {
			err = a.WaitReady()
		}
		took := time.Since(t0)
		b.StopTimer()
		if err != nil {
			if a != nil {
				a.Kill()
			}
			b.Fatalf("start %d: %v; log in %s", i, err, filepath.Join(dir, "agent.log"))
		}
		lat = append(lat, took)
		if err := a.Stop(); err != nil {
			b.Fatalf("stop %d: %v; log in %s", i, err, filepath.Join(dir, "agent.log"))
		}
		b.StartTimer()
	}
	slices.Sort(lat)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the nearest-rank p-quantile (0 < p <= 1) of sorted, 0
// when it is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
