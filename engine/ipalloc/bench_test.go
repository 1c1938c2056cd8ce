package ipalloc

import (
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// benchShape is a pool of the benchmarks and its working set: the first
// work(fill) window addresses are allocated in order, then a random
// (100-fill) % of them released, so that the keyed and the unkeyed
// benchmarks run on the same holes.
type benchShape struct {
	name string
	cfg  Config
	// inUse, when not 0, fixes the number of allocated addresses instead
	// of the window size: the working set is then inUse*100/fill (a /64
	// cannot be 99 % full; next-fit runs ahead of the working set into
	// fresh chunks, and the chunks behind it empty and are dropped).
	inUse int
}

var benchShapes = []benchShape{
	{name: "v4-24", cfg: Config{Prefix: netip.MustParsePrefix("10.1.0.0/24"), ReserveLow: 2, ReserveHigh: 2}},
	{name: "v4-16", cfg: Config{Prefix: netip.MustParsePrefix("10.1.0.0/16"), ReserveLow: 2, ReserveHigh: 2}},
	{name: "v4-12", cfg: Config{Prefix: netip.MustParsePrefix("10.16.0.0/12"), ReserveLow: 2, ReserveHigh: 2}},
	{name: "v6-64", cfg: Config{Prefix: netip.MustParsePrefix("fd00:1::/64"), ReserveLow: 2, ReserveHigh: 2}, inUse: 1 << 20},
}

var benchFills = []int{50, 90, 99}

// work is the size of the working set at fill.
func (s benchShape) work(b *testing.B, p *Pool, fill int) int {
	if s.inUse > 0 {
		return s.inUse * 100 / fill
	}
	if p.Size() > 1<<24 {
		b.Fatalf("%s: no working set", s.name)
	}
	return int(p.Size())
}

// run runs fn as the sub-benchmark pool=<shape>/fill=<fill> for every
// shape and fill.
func runShapes(b *testing.B, fn func(b *testing.B, s benchShape, fill int)) {
	for _, s := range benchShapes {
		for _, fill := range benchFills {
			b.Run(fmt.Sprintf("pool=%s/fill=%d", s.name, fill), func(b *testing.B) { fn(b, s, fill) })
		}
	}
}

// cpuClock reports the CPU time per operation of a timed loop as the
// metric cpu-ns/op: on a machine shared with other work, ns/op (wall time)
// includes the time the benchmark waited for a CPU.
type cpuClock struct {
	start time.Duration
	ok    bool
}

// startCPU starts the clock; call it right after b.ResetTimer.
func startCPU() cpuClock {
	t, ok := cpuTime()
	return cpuClock{start: t, ok: ok}
}

// report stops the clock; call it right after the timed loop.
func (c cpuClock) report(b *testing.B) {
	t, ok := cpuTime()
	if c.ok && ok && b.N > 0 {
		b.ReportMetric(float64(t-c.start)/float64(b.N), "cpu-ns/op")
	}
}

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

// holes returns which of the work offsets allocated first are released to
// reach fill: the same for every benchmark of a shape and fill.
func holes(work, fill int) []int {
	order := make([]int, work)
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order[work*fill/100:]
}

// filledPool returns a pool of shape s at fill and its allocated offsets.
func filledPool(b *testing.B, s benchShape, fill int) (*Pool, []uint64) {
	b.Helper()
	p, err := New(s.cfg)
	if err != nil {
		b.Fatal(err)
	}
	work := s.work(b, p, fill)
	offs := make([]uint64, work)
	for i := range offs {
		if offs[i], err = p.AllocateOffset(); err != nil {
			b.Fatal(err)
		}
	}
	for _, i := range holes(work, fill) {
		if err := p.ReleaseOffset(offs[i]); err != nil {
			b.Fatal(err)
		}
		offs[i] = allOnes
	}
	live := offs[:0]
	for _, off := range offs {
		if off != allOnes {
			live = append(live, off)
		}
	}
	return p, live
}

// BenchmarkAllocRelease releases a random allocated address and allocates
// one, through the netip.Addr API, at a constant fill.
func BenchmarkAllocRelease(b *testing.B) {
	runShapes(b, func(b *testing.B, s benchShape, fill int) {
		p, offs := filledPool(b, s, fill)
		live := make([]netip.Addr, len(offs))
		for i, off := range offs {
			live[i] = p.AddrAt(off)
		}
		idx := benchRandom(len(live))
		b.ReportAllocs()
		b.ResetTimer()
		clock := startCPU()
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
		clock.report(b)
	})
}

// BenchmarkAllocReleaseOffset is BenchmarkAllocRelease on offsets: the
// unkeyed baseline of BenchmarkKeyedAssignUnassign.
func BenchmarkAllocReleaseOffset(b *testing.B) {
	runShapes(b, func(b *testing.B, s benchShape, fill int) {
		p, live := filledPool(b, s, fill)
		idx := benchRandom(len(live))
		b.ReportAllocs()
		b.ResetTimer()
		clock := startCPU()
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
		clock.report(b)
	})
}

// benchKey has the shape of the IPAM plugin's allocation key: an
// attachment (network, container ID, interface) and a pod.
type benchKey struct {
	att benchAttachment
	pod benchPod
}

type benchAttachment struct{ Network, ContainerID, IfName string }

type benchPod struct{ Name, Namespace string }

// spareKeys is how many keys beyond those held the keyed benchmark cycles
// through: a key assigned was unassigned spareKeys operations before, so
// its strings are in the cache, as those of a key just decoded from a
// request are. The key unassigned is a random one of those held, so on a
// big pool its strings are cache misses.
const spareKeys = 64

var (
	benchKeyCache []benchKey
	benchKeyRand  = rand.New(rand.NewPCG(5, 6))
)

// benchKeys returns n distinct keys with realistic lengths, each string
// its own heap object as when decoded from an event: a 64-hex container
// ID, "eth0", the default network "", a pod name of a deployment and one of
// a few namespaces. The keys are made once per process.
func benchKeys(n int) []benchKey {
	if len(benchKeyCache) < n {
		rng := benchKeyRand
		namespaces := []string{"default", "kube-system", "monitoring", "payments-prod", "team-a"}
		var id [32]byte
		for i := len(benchKeyCache); i < n; i++ {
			for j := 0; j < len(id); j += 8 {
				v := rng.Uint64()
				for b := range 8 {
					id[j+b] = byte(v >> (8 * b))
				}
			}
			ns := namespaces[rng.IntN(len(namespaces))]
			benchKeyCache = append(benchKeyCache, benchKey{
				att: benchAttachment{ContainerID: hex.EncodeToString(id[:]), IfName: string([]byte("eth0"))},
				pod: benchPod{
					Name:      "web-frontend-7d4b9c8f6-" + strconv.FormatUint(rng.Uint64N(1<<25), 36),
					Namespace: string([]byte(ns)),
				},
			})
		}
	}
	return append([]benchKey(nil), benchKeyCache[:n]...)
}

// filledKeyed returns a keyed pool of shape s at fill, holding the same
// addresses as filledPool, and keys: the first held ones hold an address,
// the spareKeys after them hold none.
func filledKeyed(b *testing.B, s benchShape, fill int) (k *Keyed[benchKey], keys []benchKey, held int) {
	b.Helper()
	k, err := NewKeyed[benchKey](s.cfg)
	if err != nil {
		b.Fatal(err)
	}
	work := s.work(b, k.Pool(), fill)
	keys = benchKeys(work + spareKeys)
	for _, key := range keys[:work] {
		if _, _, err := k.Assign(key); err != nil {
			b.Fatal(err)
		}
	}
	out := holes(work, fill)
	for _, i := range out {
		if _, ok := k.Unassign(keys[i]); !ok {
			b.Fatal("not assigned")
		}
	}
	// The keys unassigned above are left out: the spare keys are the
	// only ones that the benchmark assigns.
	gone := make([]bool, work)
	for _, i := range out {
		gone[i] = true
	}
	kept := make([]benchKey, 0, work-len(out)+spareKeys)
	for i, key := range keys[:work] {
		if !gone[i] {
			kept = append(kept, key)
		}
	}
	return k, append(kept, keys[work:]...), len(kept)
}

// BenchmarkKeyedAssignUnassign unassigns a random key and assigns a new
// one at a constant fill, on the shapes and holes of
// BenchmarkAllocReleaseOffset, with keys shaped like the IPAM plugin's. It
// reports the memory of the owner index per held key (index-B/key).
func BenchmarkKeyedAssignUnassign(b *testing.B) {
	runShapes(b, func(b *testing.B, s benchShape, fill int) {
		k, keys, held := filledKeyed(b, s, fill)
		idx := benchRandom(held)
		free := held // keys[held:] hold nothing; the next to assign is keys[free]
		b.ReportAllocs()
		b.ResetTimer()
		clock := startCPU()
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
		clock.report(b)
		b.StopTimer()
		if k.Len() != held {
			b.Fatalf("%d keys hold an address, want %d", k.Len(), held)
		}
		b.ReportMetric(float64(k.indexBytes())/float64(held), "index-B/key")
	})
}

// BenchmarkKeyHash hashes a key shaped like the IPAM plugin's, as every
// keyed operation does once: the floor of the keyed cost above the
// unkeyed one. hot hashes the same few keys, cold a random one of 2^20
// (its strings are cache misses, as for a random key held long ago).
func BenchmarkKeyHash(b *testing.B) {
	for _, tc := range []struct {
		name string
		keys int
	}{{"hot", 16}, {"cold", 1 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			var t keyTable[benchKey]
			t.seed = maphash.MakeSeed()
			keys := benchKeys(tc.keys)
			idx := benchRandom(len(keys))
			var sum uint32
			b.ReportAllocs()
			b.ResetTimer()
			clock := startCPU()
			for n := range b.N {
				sum += t.tag(&keys[idx[n&(len(idx)-1)]])
			}
			clock.report(b)
			_ = sum
		})
	}
}
