package bolt

import (
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkPutSerial: one writer, so every Put is its own commit (fsync).
func BenchmarkPutSerial(b *testing.B) {
	p := openPlugin(b, testConfig(b))
	ctx := b.Context()
	value := make([]byte, 64)
	for i := 0; b.Loop(); i++ {
		if err := p.Put(ctx, "k"+strconv.Itoa(i), value); err != nil {
			b.Fatal(err)
		}
	}
	reportBatching(b, p)
}

// BenchmarkPutParallel: many writers; group commit shares each fsync.
func BenchmarkPutParallel(b *testing.B) {
	p := openPlugin(b, testConfig(b))
	ctx := b.Context()
	value := make([]byte, 64)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.Put(ctx, "k"+strconv.FormatInt(n.Add(1), 10), value); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportBatching(b, p)
}

func reportBatching(b *testing.B, p *Plugin) {
	st := p.Stats()
	if st.Commits > 0 {
		b.ReportMetric(float64(st.Writes)/float64(st.Commits), "writes/commit")
	}
}
