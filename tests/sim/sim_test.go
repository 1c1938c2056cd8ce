package sim

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A small cluster through every scenario: every node ready with a unique
// node ID; each pod change reaches its own node and no other, every
// node's count of pod changes equals contiv-ksr's writes under its
// prefix, and the allocations match the pods after the churn, after a
// node replacement and after the etcd leader was killed and restarted.
// Timings are reported, not asserted.
func TestSmallCluster(t *testing.T) {
	g := NewWithT(t)
	const n = 8
	ctx := t.Context()
	logf, err := os.Create(filepath.Join(t.TempDir(), "sim.log"))
	g.Expect(err).NotTo(HaveOccurred())
	s, err := Start(ctx, Config{Dir: t.TempDir(), Log: logf, MarkerInterval: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(s.Close()).To(Succeed()) }()

	cold, err := RunColdStart(ctx, s, n, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cold.Duplicates).To(BeEmpty(), "node IDs unique and non-zero")
	g.Expect(cold.MaxID).To(BeNumerically(">=", n))
	t.Logf("cold start: %+v", cold)

	churn, err := RunChurn(ctx, s, ChurnConfig{Ops: 120, Workers: 8, PodsPerNode: 4})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(churn.Errors).To(BeEmpty())
	g.Expect(churn.Problems).To(BeEmpty())
	g.Expect(churn.Lost).To(BeZero())
	g.Expect(churn.Creates).To(BeNumerically(">", 0))
	g.Expect(churn.Deletes).To(BeNumerically(">", 0))
	g.Expect(churn.Latency.Count).To(Equal(2*churn.Creates + churn.Deletes))
	t.Logf("churn: %d creates, %d deletes, latency %+v", churn.Creates, churn.Deletes, churn.Latency)

	rep, err := RunReplace(ctx, s, ReplaceConfig{PerMinute: 0.25, Duration: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Errors).To(BeEmpty())
	g.Expect(rep.Replaced).To(Equal(1))
	g.Expect(rep.Duplicates).To(BeEmpty())
	g.Expect(s.Live()).To(HaveLen(n))

	kill, err := RunKill(ctx, s, KillConfig{Down: 2 * time.Second, KillAfter: 500 * time.Millisecond,
		Churn: ChurnConfig{Ops: 120, Workers: 8, PodsPerNode: 4, Rate: 40}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kill.NotReady).To(BeEmpty())
	g.Expect(kill.IDChanged).To(BeEmpty())
	g.Expect(kill.Churn.Errors).To(BeEmpty())
	g.Expect(kill.Churn.Problems).To(BeEmpty())
	g.Expect(kill.Churn.Lost).To(BeZero())
	t.Logf("kill %s: restart %.0f ms, churn latency %+v", kill.Member, kill.RestartMs, kill.Churn.Latency)
}
