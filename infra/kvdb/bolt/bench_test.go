package bolt

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"go.etcd.io/bbolt"
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

// BenchmarkCheckAtOpen measures what the check of an existing file adds
// to Init (checkMeta and checkPages, which read every page below the
// high-water mark once), beside bbolt's own tx.Check and the whole Init,
// on databases of 1k and 100k IPAM-like records (~120-byte values).
func BenchmarkCheckAtOpen(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		cfg := testConfig(b)
		bulkDB(b, cfg, n)
		st, err := os.Stat(cfg.DBPath)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("keys=%d/check", n), func(b *testing.B) {
			f, err := os.Open(cfg.DBPath)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			var rep fileReport
			for b.Loop() {
				if rep, err = checkMeta(f, st.Size()); err == nil {
					err = checkPages(f, rep)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rep.meta.pgid*rep.pageSize)/(1<<20), "MiB-read")
		})
		b.Run(fmt.Sprintf("keys=%d/bbolt-tx-check", n), func(b *testing.B) {
			db, err := bbolt.Open(cfg.DBPath, 0o600, &bbolt.Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			for b.Loop() {
				err := db.View(func(tx *bbolt.Tx) error {
					for err := range tx.Check() {
						return err
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("keys=%d/init", n), func(b *testing.B) {
			for b.Loop() {
				p := newPlugin(b, cfg)
				p.Log = slog.New(slog.DiscardHandler)
				if err := p.Init(); err != nil {
					b.Fatal(err)
				}
				if err := p.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
