package floor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

const (
	page     = 4096
	filePage = 1024 // pages in the file: 4 MiB
)

// syncer writes a page and syncs it, one op at a time.
type syncer struct {
	f    *os.File
	buf  []byte
	next int64
}

func newSyncer(t testing.TB) *syncer {
	f, err := os.Create(filepath.Join(t.TempDir(), "floor"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := f.Truncate(page * filePage); err != nil {
		t.Fatal(err)
	}
	return &syncer{f: f, buf: make([]byte, page)}
}

// op writes the next page and fdatasyncs the file; it returns the time
// both took.
func (s *syncer) op() (time.Duration, error) {
	s.buf[0]++
	start := time.Now()
	if _, err := s.f.WriteAt(s.buf, s.next*page); err != nil {
		return 0, err
	}
	if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
		return 0, err
	}
	s.next = (s.next + 1) % filePage
	return time.Since(start), nil
}

// BenchmarkFdatasync is one 4 KiB write and its fdatasync per op.
func BenchmarkFdatasync(b *testing.B) {
	s := newSyncer(b)
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		d, err := s.op()
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, d)
	}
	slices.Sort(lat)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// percentile returns the nearest-rank percentile q of sorted lat.
func percentile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	i := int(q*float64(len(lat))+0.5) - 1
	return lat[min(max(i, 0), len(lat)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func TestAnOpWritesThePageAndMovesOn(t *testing.T) {
	g := NewWithT(t)
	s := newSyncer(t)
	for range 3 {
		_, err := s.op()
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(s.next).To(Equal(int64(3)))
	got := make([]byte, page)
	_, err := s.f.ReadAt(got, 2*page)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got[0]).To(Equal(byte(3)), "the third op wrote the third page")
}

func TestPercentileIsNearestRank(t *testing.T) {
	g := NewWithT(t)
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	g.Expect(percentile(lat, 0.5)).To(Equal(time.Duration(5)))
	g.Expect(percentile(lat, 0.99)).To(Equal(time.Duration(10)))
	g.Expect(percentile(nil, 0.5)).To(BeZero())
}
