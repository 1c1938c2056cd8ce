package nodeids

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
)

// TestClientsClaimDistinctIDs runs the benchmark's round at a tiny size:
// 40 clients at once get 40 distinct IDs, 1..40, the records in etcd
// agree, and the contention shows as lost transactions.
func TestClientsClaimDistinctIDs(t *testing.T) {
	g := NewWithT(t)
	const n = 40
	srv := etcdtest.Start(t)
	log := &claimLog{}
	cs := newClients(t, srv, n, log)
	defer closeClients(cs)
	out := claimAll(cs, n)
	g.Expect(check(t.Context(), srv, t, out, n)).To(Succeed())
	for _, id := range out.ids {
		g.Expect(id).To(BeNumerically("<=", n), "the smallest free IDs are taken")
	}
	g.Expect(log.claims.Load()).To(BeEquivalentTo(n), "one claim logged per client")
	g.Expect(log.conflicts.Load()).To(BeNumerically(">", 0), "clients that start together lose transactions")
}

// BenchmarkNodeIDs: nodesync clients, each with its own etcd client
// connection, claim their node IDs from one etcd; all are released at the
// same moment, at most concurrency claiming at a time (see doc.go for the
// sizes). Each op is one round on a fresh etcd with fresh clients (built
// untimed). Reported: "s" (the round's wall time), "ids/s", "conflicts"
// (lost CAS transactions, summed over the claims), "attempts" (CAS
// transactions), "listings" (of allocatedIDs/), "max-attempts" (the most
// transactions of one claim), "retries" (ClaimRetry after etcd did not
// answer) and "gave-up" (claims that hit the attempt bound and ran again).
// A duplicate ID, a client without an ID or a record in etcd that
// disagrees fails the benchmark.
func BenchmarkNodeIDs(b *testing.B) {
	for _, r := range []struct{ clients, concurrency int }{{5000, benchConcurrency}, {200, 200}} {
		b.Run(fmt.Sprintf("clients=%d/concurrency=%d", r.clients, r.concurrency), func(b *testing.B) {
			benchRound(b, r.clients, r.concurrency)
		})
	}
}

// benchConcurrency bounds the 5,000 clients' claims: see doc.go.
const benchConcurrency = 4

func benchRound(b *testing.B, n, concurrency int) {
	var took time.Duration
	var conflicts, attempts, listings, retries, gaveUp, worst int64
	for b.Loop() {
		b.StopTimer()
		srv := etcdtest.Start(b)
		log := &claimLog{}
		cs := newClients(b, srv, n, log)
		b.StartTimer()
		out := claimAll(cs, concurrency)
		b.StopTimer()
		if err := check(b.Context(), srv, b, out, n); err != nil {
			b.Fatal(err)
		}
		closeClients(cs)
		srv.Stop()
		took += out.took
		conflicts, attempts, listings = conflicts+log.conflicts.Load(), attempts+log.attempts.Load(), listings+log.listings.Load()
		retries, gaveUp, worst = retries+out.retries, gaveUp+out.gaveUp, max(worst, log.worst.Load())
		b.StartTimer()
	}
	rounds := float64(b.N)
	b.ReportMetric(took.Seconds()/rounds, "s")
	b.ReportMetric(float64(n)*rounds/took.Seconds(), "ids/s")
	b.ReportMetric(float64(conflicts)/rounds, "conflicts")
	b.ReportMetric(float64(attempts)/rounds, "attempts")
	b.ReportMetric(float64(listings)/rounds, "listings")
	b.ReportMetric(float64(worst), "max-attempts")
	b.ReportMetric(float64(retries)/rounds, "retries")
	b.ReportMetric(float64(gaveUp)/rounds, "gave-up")
}
