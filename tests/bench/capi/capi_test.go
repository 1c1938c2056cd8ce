package capi

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

// benchClaims is the number of claims of the benchmark.
const benchClaims = 1000

// BenchmarkCAPIClaims serves 1,000 claims created at once on one
// ContivIPPool; see the package documentation.
func BenchmarkCAPIClaims(b *testing.B) {
	b.Run(fmt.Sprintf("claims=%d/qps=%d/impl=contiv", benchClaims, clientQPS), func(b *testing.B) {
		var sum result
		for range b.N {
			b.StopTimer()
			r, err := runOnce(b, b, benchClaims)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%d claims Ready in %.3f s (all created after %.3f s), %d API writes: %v",
				benchClaims, r.elapsed.Seconds(), r.created.Seconds(), r.writes, r.kinds)
			sum.elapsed += r.elapsed
			sum.writes += r.writes
		}
		runs := float64(b.N)
		secs := sum.elapsed.Seconds() / runs
		b.ReportMetric(secs, "s")
		b.ReportMetric(secs*1000/benchClaims, "ms/claim")
		b.ReportMetric(benchClaims/secs, "claims/s")
		b.ReportMetric(float64(sum.writes)/runs/benchClaims, "writes/claim")
	})
}

// 20 claims: each is Ready with its own address (runOnce checks), and the
// provider wrote at least the IPAddress and the claim's status per claim.
func TestTwentyClaimsGetTheirOwnAddresses(t *testing.T) {
	const n = 20
	g := NewWithT(t)
	r, err := runOnce(t, nil, n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.writes).To(BeNumerically(">=", 2*n), "API writes: an IPAddress and a claim status per claim at least")
	t.Logf("%d claims Ready in %s, %d API writes", n, r.elapsed, r.writes)
}
