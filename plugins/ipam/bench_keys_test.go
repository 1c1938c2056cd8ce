package ipam_test

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// benchAddDelete runs AddPod + DeletePod through IPAM's handlers (durable
// when db is set) from parallel goroutines, as podmanager would without
// the event loop in between.
func benchAddDelete(b *testing.B, db kvdb.Broker) {
	i := mustFixture(b, fixtureOpts{db: db, yaml: benchConfig}, nil).ipam
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			id := podmodel.ID{Name: fmt.Sprintf("p%d", n), Namespace: "bench"}
			key := att(fmt.Sprintf("c%d", n), "eth0")
			if _, err := addPod(i, id, key); err != nil {
				b.Error(err)
				return
			}
			if _, err := deletePod(i, id, key); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAddDeletePod: the attachment-keyed path (JSON records under
// AttachmentPrefix), in memory and durable in bolt.
func BenchmarkAddDeletePod(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchAddDelete(b, nil) })
	b.Run("bolt-16-callers", func(b *testing.B) {
		db := openBolt(b, filepath.Join(b.TempDir(), "bolt.db"))
		defer db.Close()
		b.SetParallelism(8) // 8 x GOMAXPROCS goroutines: 16 on 2 cores
		benchAddDelete(b, db)
	})
}
