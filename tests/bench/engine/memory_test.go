package engine

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"
)

// BenchmarkMemory reports the heap one pool holds ("bytes", and
// "bytes/addr" when it holds addresses): the live heap after a GC with the
// pool, less the live heap after a GC before it was built (restoring its
// addresses with the take path). The keys of contiv-keyed are built before
// the first reading: its figure counts the index (the maps, with the keys'
// 80-byte string headers) but not the keys' string bytes.
func BenchmarkMemory(b *testing.B) {
	// BenchmarkEngine's last pool (a 2^20 keyed one) would make every GC
	// here slow, and is not needed any more.
	warm.name, warm.e, warm.idx = "", nil, nil
	pools := []struct {
		s      shape
		states []struct {
			name  string
			addrs func() []netip.Addr
		}
	}{
		{s: v4s16, states: []struct {
			name  string
			addrs func() []netip.Addr
		}{
			{name: "empty", addrs: func() []netip.Addr { return nil }},
			{name: "full", addrs: func() []netip.Addr { return v4s16.firstN(v4s16.size()) }},
		}},
		{s: v6s64, states: []struct {
			name  string
			addrs func() []netip.Addr
		}{
			{name: "alloc100000", addrs: func() []netip.Addr { return v6s64.firstN(100000) }},
		}},
	}
	for _, p := range pools {
		b.Run("pool="+p.s.name, func(b *testing.B) {
			for _, st := range p.states {
				b.Run("state="+st.name, func(b *testing.B) {
					for _, im := range impls {
						b.Run("impl="+im.name, func(b *testing.B) { measure(b, im, p.s, st.addrs()) })
					}
				})
			}
		})
	}
}

// measure is one cell of BenchmarkMemory. It builds a pool once unmeasured
// (so that one-time costs of the process, such as cidrset's global metrics
// registration, are left out), then builds and measures three and reports
// the median: the heap of one pool. It does so once per run, whatever
// b.N: the loop itself is empty and ns/op is suppressed (-benchtime 1x
// or Nx suits this benchmark; a duration makes it spin on the empty loop).
func measure(b *testing.B, im impl, s shape, addrs []netip.Addr) {
	if reason := im.na(s, len(addrs)); reason != "" {
		b.Skip(reason)
	}
	keys := newKeySet(len(addrs))
	if _, err := im.build(s, addrs, keys); err != nil {
		b.Fatal(err)
	}
	var sizes [3]int64
	for i := range sizes {
		n, err := heapOf(func() (any, error) { return im.build(s, addrs, keys) })
		if err != nil {
			b.Fatal(err)
		}
		sizes[i] = n
	}
	runtime.KeepAlive(keys)
	slices.Sort(sizes[:])
	bytes := float64(sizes[1])
	for b.Loop() {
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(bytes, "bytes")
	if len(addrs) > 0 {
		b.ReportMetric(bytes/float64(len(addrs)), "bytes/addr")
	}
}

// heapOf returns how much the live heap grows by the value build returns.
func heapOf(build func() (any, error)) (int64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p, err := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(p)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), err
}
