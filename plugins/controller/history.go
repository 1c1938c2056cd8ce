package controller

import (
	"sort"
	"sync"
	"time"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// EventRecord is one processed event in the history. Field names follow
// the original controller's JSON. A record is never modified once added:
// readers may share its slices.
type EventRecord struct {
	SeqNum          uint64
	ProcessingStart time.Time
	ProcessingEnd   time.Time
	IsFollowUp      bool
	FollowUpTo      uint64 `json:",omitempty"`
	Name            string
	Description     string
	Method          api.EventMethodType
	MethodName      string
	Handlers        []HandlerRecord
	TxnError        string  `json:",omitempty"`
	Txn             []TxnOp `json:",omitempty"`
	// Error is the outcome handed to the event's Done.
	Error             string `json:",omitempty"`
	VerificationError string `json:",omitempty"`
}

// HandlerRecord is what one handler did with the event.
type HandlerRecord struct {
	Handler  string
	Revert   bool   `json:",omitempty"` // this is the Revert call
	Change   string `json:",omitempty"`
	ErrorStr string `json:",omitempty"`
}

// history keeps the records, oldest first, pruned by age and count. The
// loop adds, REST reads; mu guards everything. Adding is amortised O(1):
// records leave from the front of a queue, never by copying the history.
//
// The records of the first `permanent` period after start are kept apart
// (initial): age never removes them, only the count limit, and they are
// the first to go when it does. Every later record is in recent, whose
// front is its oldest.
type history struct {
	mu        sync.Mutex
	initial   recordQueue
	recent    recordQueue
	start     time.Time
	ageLimit  time.Duration
	permanent time.Duration
	maxLen    int
}

func newHistory(start time.Time, cfg Config) *history {
	return &history{start: start, ageLimit: cfg.EventHistoryAgeLimit,
		permanent: cfg.PermanentlyRecordedInitPeriod, maxLen: cfg.MaxHistoryRecords}
}

// add appends r and prunes. Records come in SeqNum order, with
// non-decreasing processing times.
func (h *history) add(r EventRecord, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recent.len() == 0 && r.ProcessingStart.Before(h.start.Add(h.permanent)) {
		h.initial.push(r)
	} else {
		h.recent.push(r)
	}
	h.prune(now)
}

// prune drops the recent records older than the age limit, then the
// oldest records beyond maxLen, initial ones first. Each record is
// dropped once: the cost is amortised O(1) per add.
func (h *history) prune(now time.Time) {
	for h.recent.len() > 0 && now.Sub(h.recent.at(0).ProcessingEnd) > h.ageLimit {
		h.recent.pop()
	}
	for h.len() > h.maxLen {
		if h.initial.len() > 0 {
			h.initial.pop()
		} else {
			h.recent.pop()
		}
	}
}

// len is the number of records; call with mu held.
func (h *history) len() int { return h.initial.len() + h.recent.len() }

// at returns the i-th record, oldest first; call with mu held.
func (h *history) at(i int) *EventRecord {
	if n := h.initial.len(); i >= n {
		return h.recent.at(i - n)
	}
	return h.initial.at(i)
}

// search returns the smallest index i in [0, len) for which f(record i)
// is true, or len; f must be false then true along the history (records
// are sorted by SeqNum and by processing start).
func (h *history) search(f func(*EventRecord) bool) int {
	return sort.Search(h.len(), func(i int) bool { return f(h.at(i)) })
}

// page is the answer to one query: the records, oldest first, and whether
// older records of the query's range were left out.
type page struct {
	records   []EventRecord
	olderLeft bool
}

// query selects the records of q; see historyQuery. The records are
// copied (shallow: records are never modified) under the lock, at most
// q.limit of them (0: no limit).
func (h *history) query(q historyQuery) page {
	h.mu.Lock()
	defer h.mu.Unlock()
	lo, hi := h.bounds(q)
	n := hi - lo
	if q.limit > 0 {
		n = min(n, q.limit)
	}
	if q.first != nil {
		n = min(n, *q.first)
	} else if q.last != nil {
		n = min(n, *q.last)
	}
	from := hi - n // newest first: the page ends at hi
	if q.first != nil {
		from = lo
	}
	out := make([]EventRecord, 0, n)
	for i := from; i < from+n; i++ {
		out = append(out, *h.at(i))
	}
	return page{records: out, olderLeft: q.first == nil && from > lo}
}

// bounds returns the index range [lo, hi) the query's filters select;
// call with mu held.
func (h *history) bounds(q historyQuery) (lo, hi int) {
	lo, hi = 0, h.len()
	switch {
	case q.seqNum != nil:
		lo = h.search(func(r *EventRecord) bool { return r.SeqNum >= *q.seqNum })
		hi = h.search(func(r *EventRecord) bool { return r.SeqNum > *q.seqNum })
	case q.since != nil || q.until != nil:
		if q.since != nil {
			lo = h.search(func(r *EventRecord) bool { return !r.ProcessingStart.Before(*q.since) })
		}
		if q.until != nil {
			hi = h.search(func(r *EventRecord) bool { return r.ProcessingStart.After(*q.until) })
		}
	case q.from != nil || q.to != nil:
		if q.from != nil {
			lo = h.search(func(r *EventRecord) bool { return r.SeqNum >= *q.from })
		}
		if q.to != nil {
			hi = h.search(func(r *EventRecord) bool { return r.SeqNum > *q.to })
		}
	}
	if q.before != nil {
		hi = min(hi, h.search(func(r *EventRecord) bool { return r.SeqNum >= *q.before }))
	}
	return lo, max(lo, hi)
}

// historyQuery is the parsed query of GET /controller/event-history.
//
// The range is the first set of: seqNum; since/until; from/to; else every
// record. before (a sequence number) cuts the range at that event,
// whatever selected it. From the range, first takes the oldest records,
// else last the newest, else the newest; never more than limit (0: no
// limit).
type historyQuery struct {
	seqNum       *uint64
	since, until *time.Time
	from, to     *uint64
	before       *uint64
	first, last  *int
	limit        int
}

// recordQueue is a FIFO of records: push at the back, pop at the front,
// both amortised O(1). Popped slots are cleared (their slices are
// released) and the live records are moved down once the dead front is
// half of the slice.
type recordQueue struct {
	buf  []EventRecord
	head int
}

func (q *recordQueue) len() int { return len(q.buf) - q.head }

func (q *recordQueue) at(i int) *EventRecord { return &q.buf[q.head+i] }

func (q *recordQueue) push(r EventRecord) { q.buf = append(q.buf, r) }

// pop drops the front record.
func (q *recordQueue) pop() {
	q.buf[q.head] = EventRecord{}
	q.head++
	switch {
	case q.head == len(q.buf):
		q.buf, q.head = q.buf[:0], 0
	case q.head >= 64 && q.head >= len(q.buf)/2:
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
}
