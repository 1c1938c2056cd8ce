package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

const benchConfig = `
ipamConfig:
  podSubnetCIDR: 10.128.0.0/9
  podSubnetOneNodePrefixLen: 16
  nodeInterconnectCIDR: 192.168.16.0/24
`

// benchAllocRelease allocates and releases pod addresses, durable when db
// is set, from parallel goroutines.
func benchAllocRelease(b *testing.B, db kvdb.Broker) {
	i := mustFixture(b, fixtureOpts{db: db, yaml: benchConfig}, nil).ipam
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := podmodel.ID{Name: fmt.Sprintf("p%d", next.Add(1)), Namespace: "bench"}
			if _, err := i.AllocatePodIP(id, "", ""); err != nil {
				b.Error(err)
				return
			}
			if err := i.ReleasePodIP(id); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAllocatePodIP: allocate + release through the plugin API, in
// memory and durable in bolt (two fsync'ed writes per iteration, shared by
// concurrent callers through bolt's group commit).
func BenchmarkAllocatePodIP(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchAllocRelease(b, nil) })
	b.Run("bolt", func(b *testing.B) {
		db := openBolt(b, filepath.Join(b.TempDir(), "bolt.db"))
		defer db.Close()
		benchAllocRelease(b, db)
	})
	b.Run("bolt-16-callers", func(b *testing.B) {
		db := openBolt(b, filepath.Join(b.TempDir(), "bolt.db"))
		defer db.Close()
		b.SetParallelism(8) // 8 x GOMAXPROCS goroutines: 16 on 2 cores
		benchAllocRelease(b, db)
	})
}

// decideConfig gives one node a million pod addresses, room for every
// add of a benchmark run.
const decideConfig = `
ipamConfig:
  podSubnetCIDR: 10.128.0.0/9
  podSubnetOneNodePrefixLen: 12
  nodeInterconnectCIDR: 192.168.16.0/24
`

// addCall is one caller's ADD handed to the event loop.
type addCall struct {
	id    podmodel.ID
	final chan func(ctx context.Context) (netip.Addr, error)
}

// BenchmarkDurableAddsThroughOneDecider measures durable adds the way the
// CNI path makes them: callers hand their ADD to ONE goroutine playing
// the controller's event loop, which submits them to the keeper one at a
// time and passes each durable outcome (final) back; each caller waits
// for its final. The store is a real bolt file, so every add is fsync'ed.
func BenchmarkDurableAddsThroughOneDecider(b *testing.B) {
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			db := openBolt(b, filepath.Join(b.TempDir(), "bolt.db"))
			defer db.Close()
			i := mustFixture(b, fixtureOpts{db: db, yaml: decideConfig}, nil).ipam
			before := db.Stats().Commits
			benchDurableAdds(b, i, callers)
			b.ReportMetric(float64(b.N)/float64(max(db.Stats().Commits-before, 1)), "adds/commit")
		})
	}
}

func benchDurableAdds(b *testing.B, i *ipam.Plugin, callers int) {
	loop := make(chan addCall)
	loopDone := make(chan struct{})
	go func() { // the event loop: one ADD at a time
		defer close(loopDone)
		for c := range loop {
			s := ipam.SubmitAllocation(i, c.id)
			if s.Err != nil {
				c.final <- func(context.Context) (netip.Addr, error) { return s.Addr, s.Err }
				continue
			}
			c.final <- s.Final
		}
	}()
	var next atomic.Int64
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			final := make(chan func(ctx context.Context) (netip.Addr, error), 1)
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				t0 := time.Now()
				loop <- addCall{id: podmodel.ID{Name: fmt.Sprintf("p%d", n), Namespace: "bench"}, final: final}
				if _, err := (<-final)(context.Background()); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(loop)
	<-loopDone
	reportLatency(b, slices.Concat(lat...), elapsed)
}

// reportLatency reports ops/s and the p50 and p99 latency in ms.
func reportLatency(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
