package ipalloc

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// benchShapes are the pools of the benchmarks. The working set is the
// first 65532 window addresses in both: the whole /16, and as many
// addresses of the /64, where "fill" is the share of that working set that
// is allocated (a /64 cannot be 99 % full; next-fit runs ahead of the
// working set into fresh chunks and drops the chunks that empty).
var benchShapes = []struct {
	name string
	cfg  Config
}{
	{name: "ipv4-16", cfg: Config{Prefix: netip.MustParsePrefix("10.1.0.0/16"), ReserveLow: 2, ReserveHigh: 2}},
	{name: "ipv6-64", cfg: Config{Prefix: netip.MustParsePrefix("fd00:1::/64"), ReserveLow: 2, ReserveHigh: 2}},
}

const benchWorkingSet = 65532

// benchRandom returns precomputed indices into a slice of n, so that the
// timed loop draws no random numbers.
func benchRandom(n int) []int {
	rng := rand.New(rand.NewPCG(1, 2))
	idx := make([]int, 1<<16)
	for i := range idx {
		idx[i] = rng.IntN(n)
	}
	return idx
}

// filledPool returns a pool whose working set is fill % allocated, and the
// allocated offsets in random order.
func filledPool(b *testing.B, cfg Config, fill int) (*Pool, []uint64) {
	b.Helper()
	p, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	live := make([]uint64, 0, benchWorkingSet)
	for range benchWorkingSet {
		off, err := p.AllocateOffset()
		if err != nil {
			b.Fatal(err)
		}
		live = append(live, off)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	keep := benchWorkingSet * fill / 100
	for _, off := range live[keep:] {
		if err := p.ReleaseOffset(off); err != nil {
			b.Fatal(err)
		}
	}
	return p, live[:keep]
}

// BenchmarkAllocRelease releases a random allocated address and allocates
// one, through the netip.Addr API, at a constant fill.
func BenchmarkAllocRelease(b *testing.B) {
	for _, fill := range []int{50, 90, 99} {
		for _, shape := range benchShapes {
			b.Run(fmt.Sprintf("fill=%d/%s", fill, shape.name), func(b *testing.B) {
				p, offs := filledPool(b, shape.cfg, fill)
				live := make([]netip.Addr, len(offs))
				for i, off := range offs {
					live[i] = p.AddrAt(off)
				}
				idx := benchRandom(len(live))
				b.ReportAllocs()
				b.ResetTimer()
				for n := range b.N {
					i := idx[n&(len(idx)-1)]
					if err := p.Release(live[i]); err != nil {
						b.Fatal(err)
					}
					a, err := p.Allocate()
					if err != nil {
						b.Fatal(err)
					}
					live[i] = a
				}
			})
		}
	}
}

// BenchmarkAllocReleaseOffset is BenchmarkAllocRelease on offsets.
func BenchmarkAllocReleaseOffset(b *testing.B) {
	for _, fill := range []int{50, 90, 99} {
		for _, shape := range benchShapes {
			b.Run(fmt.Sprintf("fill=%d/%s", fill, shape.name), func(b *testing.B) {
				p, live := filledPool(b, shape.cfg, fill)
				idx := benchRandom(len(live))
				b.ReportAllocs()
				b.ResetTimer()
				for n := range b.N {
					i := idx[n&(len(idx)-1)]
					if err := p.ReleaseOffset(live[i]); err != nil {
						b.Fatal(err)
					}
					off, err := p.AllocateOffset()
					if err != nil {
						b.Fatal(err)
					}
					live[i] = off
				}
			})
		}
	}
}

// BenchmarkKeyedAssignUnassign unassigns a random pod and assigns a new one
// on a /16 at 99 % fill, with struct keys.
func BenchmarkKeyedAssignUnassign(b *testing.B) {
	for _, shape := range benchShapes {
		b.Run("fill=99/"+shape.name, func(b *testing.B) {
			k, err := NewKeyed[podKey](shape.cfg)
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]podKey, benchWorkingSet)
			for i := range keys {
				keys[i] = podKey{Namespace: "default", Name: fmt.Sprintf("pod-%d", i)}
			}
			held := benchWorkingSet * 99 / 100
			for _, key := range keys[:held] {
				if _, _, err := k.Assign(key); err != nil {
					b.Fatal(err)
				}
			}
			idx := benchRandom(held)
			free := held // keys[held:] hold nothing; the next to assign is keys[free]
			b.ReportAllocs()
			b.ResetTimer()
			for n := range b.N {
				i := idx[n&(len(idx)-1)]
				if _, ok := k.Unassign(keys[i]); !ok {
					b.Fatal("not assigned")
				}
				if _, _, err := k.Assign(keys[free]); err != nil {
					b.Fatal(err)
				}
				keys[i], keys[free] = keys[free], keys[i]
				if free++; free == len(keys) {
					free = held
				}
			}
		})
	}
}
