package nodecidr

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

// benchNodes is the number of Nodes of the benchmark.
const benchNodes = 5000

// BenchmarkNodeCIDRs gives a pod CIDR to each of 5,000 Nodes, with each
// implementation on its own API server; see the package documentation.
func BenchmarkNodeCIDRs(b *testing.B) {
	for _, im := range impls {
		b.Run(fmt.Sprintf("nodes=%d/qps=%d/impl=%s", benchNodes, clientQPS, im.name), func(b *testing.B) {
			var sum result
			for range b.N {
				b.StopTimer()
				r, err := runOnce(b, b, im, benchNodes)
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("%s: %d Nodes in %.3f s, %d API writes, %d claim writes", im.name, benchNodes, r.elapsed.Seconds(), r.writes, r.claimWrites)
				sum.elapsed += r.elapsed
				sum.writes += r.writes
				sum.claimWrites += r.claimWrites
			}
			runs := float64(b.N)
			secs := sum.elapsed.Seconds() / runs
			b.ReportMetric(secs, "s")
			b.ReportMetric(benchNodes/secs, "nodes/s")
			b.ReportMetric(float64(sum.writes)/runs/benchNodes, "writes/node")
			b.ReportMetric(float64(sum.claimWrites)/runs/benchNodes, "claim-writes/node")
		})
	}
}

// Both allocators, at 20 Nodes: every Node gets its own CIDR (runOnce
// checks), with one API write per Node (the patch), and ours writes a
// claim and deletes it per Node.
func TestBothAllocatorsGiveEachNodeItsOwnCIDR(t *testing.T) {
	const n = 20
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := runOnce(t, nil, im, n)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.writes).To(BeEquivalentTo(n), "API writes: one patch per Node")
			want := 0
			if im.name == "contiv" {
				want = 2 * n
			}
			g.Expect(r.claimWrites).To(BeEquivalentTo(want), "claim writes")
			t.Logf("%s: %d nodes in %s", im.name, n, r.elapsed)
		})
	}
}
