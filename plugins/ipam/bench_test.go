package ipam_test

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/contiv-ipam/agent/infra/kvdb"
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
