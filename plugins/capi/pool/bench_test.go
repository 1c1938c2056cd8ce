package pool

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/contiv-ipam/agent/engine/cidr"
	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
)

// BenchmarkAllocateRelease allocates and releases one owner in a /16 pool
// (65534 addresses) filled at random to 50, 90 and 99 %, and in an IPv6
// /64 holding 60000 addresses.
func BenchmarkAllocateRelease(b *testing.B) {
	shapes := []struct {
		name string
		spec v1alpha1.ContivIPPoolSpec
		fill int
	}{
		{"v4-16-50pct", spec("10.0.0.0/16"), 65534 * 50 / 100},
		{"v4-16-90pct", spec("10.0.0.0/16"), 65534 * 90 / 100},
		{"v4-16-99pct", spec("10.0.0.0/16"), 65534 * 99 / 100},
		{"v6-64-60k", spec("2001:db8::/64"), 60000},
	}
	for _, sh := range shapes {
		for _, st := range []Strategy{LowestFree, NextFit} {
			b.Run(sh.name+"/"+string(st), func(b *testing.B) {
				p := mustPool(b, strategy(sh.spec, st))
				fill(b, p, sh.fill)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := p.Allocate("bench", t0); err != nil {
						b.Fatal(err)
					}
					p.Release("bench", t0)
				}
			})
		}
	}
}

// fill restores n owners at addresses spread at random over the first
// 65534 addresses of the pool.
func fill(b *testing.B, p *Pool, n int) {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 1))
	base := p.parts[0].first
	for _, off := range r.Perm(65534)[:n] {
		a, err := cidr.Add(base, uint64(off))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Restore(fmt.Sprint("o", off), a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestore is the start of a provider: a /16 pool rebuilt from
// 65534 IPAddresses.
func BenchmarkRestore(b *testing.B) {
	s := spec("10.0.0.0/16")
	b.ReportAllocs()
	for range b.N {
		p := mustPool(b, s)
		fill(b, p, 65534)
	}
}
