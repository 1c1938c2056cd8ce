package controller

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

func TestHistoryPrunesByAgeButKeepsTheInitialPeriod(t *testing.T) {
	g := NewWithT(t)
	start := time.Unix(1_000_000, 0)
	cfg := DefaultConfig()
	cfg.EventHistoryAgeLimit = time.Hour
	cfg.PermanentlyRecordedInitPeriod = 10 * time.Minute
	h := newHistory(start, cfg)
	at := func(seq uint64, d time.Duration) EventRecord {
		return EventRecord{SeqNum: seq, ProcessingStart: start.Add(d), ProcessingEnd: start.Add(d)}
	}
	h.add(at(1, time.Minute), start.Add(time.Minute))       // initial period: permanent
	h.add(at(2, 20*time.Minute), start.Add(20*time.Minute)) // ages out
	h.add(at(3, 3*time.Hour), start.Add(3*time.Hour))
	var seqs []uint64
	for _, r := range h.query(historyQuery{}).records {
		seqs = append(seqs, r.SeqNum)
	}
	g.Expect(seqs).To(Equal([]uint64{1, 3}))
}

func TestHistoryIsBoundedByCount(t *testing.T) {
	g := NewWithT(t)
	cfg := DefaultConfig()
	cfg.MaxHistoryRecords = 3
	cfg.PermanentlyRecordedInitPeriod = 0
	now := time.Now()
	h := newHistory(now, cfg)
	for i := uint64(1); i <= 5; i++ {
		h.add(EventRecord{SeqNum: i, ProcessingStart: now, ProcessingEnd: now}, now)
	}
	recs := h.query(historyQuery{}).records
	g.Expect(recs).To(HaveLen(3))
	g.Expect(recs[0].SeqNum).To(Equal(uint64(3)))
}

// The history keeps exactly what the straightforward rule keeps (the
// records of the initial period, and those not older than the age limit;
// then the newest maxLen), across many adds, prunes and compactions.
func TestHistoryMatchesTheNaiveModel(t *testing.T) {
	g := NewWithT(t)
	start := time.Unix(1_000_000, 0)
	cfg := DefaultConfig()
	cfg.MaxHistoryRecords = 150
	cfg.EventHistoryAgeLimit = 100 * time.Second
	cfg.PermanentlyRecordedInitPeriod = 60 * time.Second
	h := newHistory(start, cfg)
	rnd := rand.New(rand.NewPCG(1, 2))
	var model []EventRecord
	at := start
	for seq := uint64(1); seq <= 5000; seq++ {
		at = at.Add(time.Duration(rnd.IntN(3000)) * time.Millisecond)
		if seq%1000 == 0 {
			at = at.Add(time.Hour) // everything but the initial period ages out
		}
		r := EventRecord{SeqNum: seq, ProcessingStart: at, ProcessingEnd: at}
		h.add(r, at)
		model = naivePrune(append(model, r), start, at, cfg)
		got := h.query(historyQuery{}).records
		g.Expect(seqsOf(got)).To(Equal(seqsOf(model)), "after seq %d", seq)
	}
}

// naivePrune is the rule the history implements, written plainly.
func naivePrune(recs []EventRecord, start, now time.Time, cfg Config) []EventRecord {
	var kept []EventRecord
	for _, r := range recs {
		if r.ProcessingStart.Before(start.Add(cfg.PermanentlyRecordedInitPeriod)) ||
			now.Sub(r.ProcessingEnd) <= cfg.EventHistoryAgeLimit {
			kept = append(kept, r)
		}
	}
	if over := len(kept) - cfg.MaxHistoryRecords; over > 0 {
		kept = kept[over:]
	}
	return kept
}

func seqsOf(recs []EventRecord) []uint64 {
	out := []uint64{}
	for _, r := range recs {
		out = append(out, r.SeqNum)
	}
	return out
}

// fakeWatcher counts resync requests.
type fakeWatcher struct{ resyncs atomic.Int32 }

func (f *fakeWatcher) Start()         {}
func (f *fakeWatcher) Stop()          {}
func (f *fakeWatcher) RequestResync() { f.resyncs.Add(1) }

// restPlugin is a controller with a running loop and REST, but no DB.
func restPlugin(t *testing.T) (*Plugin, *resttest.Server, *fakeWatcher) {
	t.Helper()
	srv := resttest.New(t)
	p := NewPlugin()
	p.HTTP = srv.Plugin
	p.Southbound = NewMemSouthbound()
	p.metrics = newLoopMetrics()
	p.EventHandlers = []api.EventHandler{newHandler("a", &journal{})}
	p.cfg = testConfig()
	p.loop = newEventLoop(p.cfg, p.EventHandlers, p.Southbound, discardLog(), p)
	p.loop.start()
	t.Cleanup(p.loop.stop)
	w := &fakeWatcher{}
	p.watcher = w
	p.registerHandlers()
	return p, srv, w
}

func TestEventHistoryOverREST(t *testing.T) {
	g := NewWithT(t)
	p, srv, _ := restPlugin(t)
	g.Expect(p.PushEvent(dbResync())).To(Succeed())
	for i := range 4 {
		ev := newEvent(fmt.Sprintf("e%d", i), api.BestEffort)
		g.Expect(p.PushEvent(ev)).To(Succeed())
		g.Expect(ev.wait(t)).To(Succeed())
	}
	get := func(query string) (int, []EventRecord) {
		status, body := srv.Get(EventHistoryPath + query)
		var recs []EventRecord
		if status == http.StatusOK {
			g.Expect(json.Unmarshal([]byte(body), &recs)).To(Succeed(), body)
		}
		return status, recs
	}
	seqs := func(recs []EventRecord) []uint64 {
		var out []uint64
		for _, r := range recs {
			out = append(out, r.SeqNum)
		}
		return out
	}
	status, all := get("")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(seqs(all)).To(Equal([]uint64{1, 2, 3, 4, 5}))
	g.Expect(all[0].Name).To(Equal(api.DBResyncName))
	g.Expect(all[1].Handlers).To(Equal([]HandlerRecord{{Handler: "a", Change: "a updated"}}))
	g.Expect(all[1].Txn).To(ContainElement(TxnOp{Key: "a/e0", Operation: "put", Value: `"e0 event"`}))

	_, recs := get("?seq-num=3")
	g.Expect(seqs(recs)).To(Equal([]uint64{3}))
	_, recs = get("?from=2&to=3")
	g.Expect(seqs(recs)).To(Equal([]uint64{2, 3}))
	_, recs = get("?first=2")
	g.Expect(seqs(recs)).To(Equal([]uint64{1, 2}))
	_, recs = get("?last=2")
	g.Expect(seqs(recs)).To(Equal([]uint64{4, 5}))
	_, recs = get(fmt.Sprintf("?since=%d", time.Now().Add(-time.Minute).Unix()))
	g.Expect(recs).To(HaveLen(5))
	_, recs = get(fmt.Sprintf("?until=%d", time.Now().Add(-time.Minute).Unix()))
	g.Expect(recs).To(BeEmpty())
	_, recs = get("?seq-num=2&last=1")
	g.Expect(seqs(recs)).To(Equal([]uint64{2}), "seq-num wins")

	status, body := srv.Get(EventHistoryPath + "?seq-num=99")
	g.Expect(status).To(Equal(http.StatusNotFound))
	g.Expect(body).To(ContainSubstring("event with such sequence number is not recorded"))
	status, body = srv.Get(EventHistoryPath + "?first=many")
	g.Expect(status).To(Equal(http.StatusBadRequest))
	g.Expect(body).To(ContainSubstring(`query first=\"many\"`))
}

func TestResyncAndConfigOverREST(t *testing.T) {
	g := NewWithT(t)
	p, srv, w := restPlugin(t)
	status, body := srv.Post(ResyncPath, "")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(ResyncDispatched))
	g.Expect(w.resyncs.Load()).To(Equal(int32(1)))

	g.Expect(p.PushEvent(dbResync())).To(Succeed())
	g.Eventually(func() string { _, b := srv.Get(ConfigPath); return b }).Should(ContainSubstring(`"a/resync": "1"`))
	status, _ = srv.Get(ResyncPath)
	g.Expect(status).To(Equal(http.StatusMethodNotAllowed))
}

func TestMetricsCountEventsByOutcome(t *testing.T) {
	g := NewWithT(t)
	p, _, _ := restPlugin(t)
	g.Expect(p.PushEvent(dbResync())).To(Succeed())
	h := p.EventHandlers[0].(*testHandler)
	h.setFail("Update", fmt.Errorf("no"))
	ev := newEvent("bad", api.BestEffortIgnoreErrors)
	g.Expect(p.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(HaveOccurred())
	g.Expect(testutilCount(p.metrics, api.DBResyncName, "ok")).To(Equal(1.0))
	g.Expect(testutilCount(p.metrics, "bad", "error")).To(Equal(1.0))

	h.setFail("Update", api.NewAbortEventError(fmt.Errorf("not now")))
	ev = newEvent("aborted", api.BestEffort)
	g.Expect(p.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(HaveOccurred())
	g.Expect(testutilCount(p.metrics, "aborted", "abort")).To(Equal(1.0))

	h.setFail("Update", api.NewFatalError(fmt.Errorf("broken")))
	ev = newEvent("fatal", api.BestEffort)
	g.Expect(p.PushEvent(ev)).To(Succeed())
	g.Expect(ev.wait(t)).To(HaveOccurred())
	g.Expect(testutilCount(p.metrics, "fatal", "fatal")).To(Equal(1.0))
}

func testutilCount(m *loopMetrics, event, outcome string) float64 {
	return testutil.ToFloat64(m.events.WithLabelValues(event, outcome))
}

func TestEventHistoryBeforeInitIsEmpty(t *testing.T) {
	g := NewWithT(t)
	g.Expect(NewPlugin().EventHistory()).To(BeNil())
}
