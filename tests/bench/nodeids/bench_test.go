package nodeids

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// TestClientsClaimDistinctIDs runs the benchmark's herd at a tiny size:
// 40 clients at once (own connection each, and 8 per connection) get 40
// distinct IDs, the records in etcd agree, nobody gives up, and the IDs
// stay within the compactness bound of nodesync's doc.
func TestClientsClaimDistinctIDs(t *testing.T) {
	for _, perConn := range []int{1, 8} {
		t.Run(fmt.Sprintf("per-conn=%d", perConn), func(t *testing.T) {
			g := NewWithT(t)
			const n = 40
			srv := etcdtest.Start(t)
			log := &claimLog{}
			cs, dbs := newClients(t, srv, n, perConn, log)
			defer closeClients(cs, dbs)
			out := claimAll(cs, n)
			g.Expect(check(t.Context(), srv, t, out, n)).To(Succeed())
			g.Expect(out.gaveUp).To(BeZero())
			g.Expect(int(out.maxID())).To(BeNumerically("<=", n-1+nodesync.MaxClaimWindow), "the compactness bound")
			g.Expect(log.claims.Load()).To(BeEquivalentTo(n), "one claim logged per client")
		})
	}
}

// herd is one row of BenchmarkNodeIDs: clients released at once, at most
// concurrency claiming at a time, perConn clients per etcd connection.
type herd struct{ clients, concurrency, perConn int }

// herds are the rows (see doc.go).
var herds = []herd{
	{clients: 5000, concurrency: 5000, perConn: 50},
	{clients: 1000, concurrency: 1000, perConn: 1},
	{clients: 200, concurrency: 200, perConn: 1},
}

// BenchmarkNodeIDs: nodesync clients claim their node IDs from one etcd;
// all are released at the same moment (see doc.go for the rows). Each op
// is one round on a fresh etcd with fresh clients (built untimed).
// Reported: "s" (the round's wall time), "ids/s", "conflicts" (lost CAS
// transactions, summed over the claims), "attempts" (CAS transactions),
// "listings" (of allocatedIDs/), "keys-listed" (the keys those listings
// returned, summed over the claims), "max-attempts" (the most transactions of
// one claim), "max-id" (the highest ID claimed), "retries" (ClaimRetry
// after etcd did not answer) and "gave-up" (claims that hit the attempt
// bound and ran again; must be 0). A duplicate ID, a client without an ID
// or a record in etcd that disagrees fails the benchmark.
func BenchmarkNodeIDs(b *testing.B) {
	for _, r := range herds {
		b.Run(fmt.Sprintf("clients=%d/concurrency=%d/per-conn=%d", r.clients, r.concurrency, r.perConn), func(b *testing.B) {
			benchRound(b, r)
		})
	}
}

func benchRound(b *testing.B, r herd) {
	var took time.Duration
	var conflicts, attempts, listings, keysListed, retries, gaveUp, worst, maxID int64
	for b.Loop() {
		b.StopTimer()
		srv := etcdtest.Start(b)
		log := &claimLog{}
		cs, dbs := newClients(b, srv, r.clients, r.perConn, log)
		b.StartTimer()
		out := claimAll(cs, r.concurrency)
		b.StopTimer()
		if err := check(b.Context(), srv, b, out, r.clients); err != nil {
			b.Fatal(err)
		}
		closeClients(cs, dbs)
		srv.Stop()
		took += out.took
		conflicts, attempts, listings = conflicts+log.conflicts.Load(), attempts+log.attempts.Load(), listings+log.listings.Load()
		keysListed += log.keysListed.Load()
		retries, gaveUp, worst = retries+out.retries, gaveUp+out.gaveUp, max(worst, log.worst.Load())
		maxID = max(maxID, int64(out.maxID()))
		b.StartTimer()
	}
	rounds := float64(b.N)
	b.ReportMetric(took.Seconds()/rounds, "s")
	b.ReportMetric(float64(r.clients)*rounds/took.Seconds(), "ids/s")
	b.ReportMetric(float64(conflicts)/rounds, "conflicts")
	b.ReportMetric(float64(attempts)/rounds, "attempts")
	b.ReportMetric(float64(listings)/rounds, "listings")
	b.ReportMetric(float64(keysListed)/rounds, "keys-listed")
	b.ReportMetric(float64(worst), "max-attempts")
	b.ReportMetric(float64(maxID), "max-id")
	b.ReportMetric(float64(retries)/rounds, "retries")
	b.ReportMetric(float64(gaveUp)/rounds, "gave-up")
}
