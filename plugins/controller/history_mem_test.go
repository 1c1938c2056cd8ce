package controller

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// fullHistory is the number of records of a full history (the default
// maxHistoryRecords).
const fullHistory = 10000

// sampleRecord is an event record of a realistic size: about 400 bytes
// of indented JSON, as a pod event with two handlers and one txn op.
func sampleRecord(seq uint64, at time.Time) EventRecord {
	return EventRecord{
		SeqNum: seq, ProcessingStart: at, ProcessingEnd: at.Add(time.Millisecond),
		Name:        api.KubeStateChangeName,
		Description: fmt.Sprintf("Kubernetes State Change: update k8s/pod/web-%05d/namespace/default", seq),
		Method:      api.Update, MethodName: api.Update.String(),
		Handlers: []HandlerRecord{
			{Handler: "nodesync"}, {Handler: "ipam", Change: fmt.Sprintf("pod default/web-%05d: 10.1.1.%d", seq, seq%250)},
		},
		Txn: []TxnOp{{Key: fmt.Sprintf("ipam/pod/default/web-%05d", seq), Operation: "put", Value: `"10.1.1.7"`}},
	}
}

// fillHistory adds n records to p's history.
func fillHistory(p *Plugin, n int) {
	now := time.Now()
	for i := 1; i <= n; i++ {
		p.loop.history.add(sampleRecord(uint64(i), now), now)
	}
}

// countingWriter is a ResponseWriter that keeps the status and counts the
// body instead of keeping it, so that only the server side allocates.
type countingWriter struct {
	header http.Header
	status int
	bytes  int
}

func newCountingWriter() *countingWriter { return &countingWriter{header: http.Header{}} }

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.bytes += len(b)
	return len(b), nil
}

// heapPeak samples HeapAlloc until stop is closed and returns the peak.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// parallelGETs runs n concurrent GETs of the history handler and returns
// the answers' statuses and sizes, the bytes allocated per GET and the
// peak heap growth (runtime.MemStats).
func parallelGETs(p *Plugin, n int, query string) (statuses map[int]int, maxBody int, allocPerGET, peakGrowth uint64) {
	h := p.historyHandler(rest.NewFormatter(nil))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stop := make(chan struct{})
	peak := heapPeak(stop)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses = map[int]int{}
	var largest atomic.Int64
	for range n {
		wg.Go(func() {
			w := newCountingWriter()
			h(w, httptest.NewRequest(http.MethodGet, EventHistoryPath+query, nil))
			mu.Lock()
			statuses[w.status]++
			mu.Unlock()
			if int64(w.bytes) > largest.Load() {
				largest.Store(int64(w.bytes))
			}
		})
	}
	wg.Wait()
	close(stop)
	runtime.ReadMemStats(&after)
	top := <-peak
	growth := uint64(0)
	if top > before.HeapAlloc {
		growth = top - before.HeapAlloc
	}
	return statuses, int(largest.Load()), (after.TotalAlloc - before.TotalAlloc) / uint64(n), growth
}

// 100 parallel GETs of a full history (10,000 records): each answer holds
// the default limit of records, allocates little, and the heap stays
// bounded (requests beyond the concurrency limit get 503 at once).
func TestParallelHistoryGETsStayBounded(t *testing.T) {
	g := NewWithT(t)
	p, _, _ := restPlugin(t)
	fillHistory(p, fullHistory)

	statuses, maxBody, perGET, growth := parallelGETs(p, 100, "")
	t.Logf("100 parallel GETs of %d records: statuses %v, largest body %d B, %d B allocated per GET, heap peak +%d MiB",
		fullHistory, statuses, maxBody, perGET, growth>>20)
	g.Expect(statuses[http.StatusOK]).To(BeNumerically(">=", 1))
	g.Expect(statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable]).To(Equal(100), "200 or 503 only")
	g.Expect(maxBody).To(BeNumerically("<", 100<<10), "the default limit of 100 records: under 100 KiB")
	g.Expect(perGET).To(BeNumerically("<", 1<<20), "bytes allocated per GET")
	g.Expect(growth).To(BeNumerically("<", 64<<20), "heap growth during 100 parallel GETs")
}

// BenchmarkHistoryAdd is the cost of recording one event into a full
// history (10,000 records): the pruning must not copy the history.
func BenchmarkHistoryAdd(b *testing.B) {
	cfg := DefaultConfig()
	cfg.PermanentlyRecordedInitPeriod = 0
	now := time.Now()
	h := newHistory(now, cfg)
	for i := 1; i <= cfg.MaxHistoryRecords; i++ {
		h.add(sampleRecord(uint64(i), now), now)
	}
	rec := sampleRecord(0, now)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		rec.SeqNum = uint64(cfg.MaxHistoryRecords + i + 1)
		h.add(rec, now)
	}
}

// BenchmarkHistoryGET is one GET of the default page of a full history.
func BenchmarkHistoryGET(b *testing.B) {
	srv := newBenchPlugin(b)
	h := srv.historyHandler(rest.NewFormatter(nil))
	b.ReportAllocs()
	for b.Loop() {
		w := newCountingWriter()
		h(w, httptest.NewRequest(http.MethodGet, EventHistoryPath, nil))
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// newBenchPlugin is a controller with a full history and no loop running.
func newBenchPlugin(b *testing.B) *Plugin {
	p := NewPlugin()
	p.cfg = DefaultConfig()
	p.historyReads = make(chan struct{}, p.cfg.EventHistoryMaxConcurrentReads)
	p.loop = newEventLoop(p.cfg, nil, NewMemSouthbound(), discardLog(), p)
	fillHistory(p, fullHistory)
	return p
}
