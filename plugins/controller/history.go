package controller

import (
	"sync"
	"time"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// EventRecord is one processed event in the history. Field names follow
// the original controller's JSON.
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

// history keeps the records, pruned by age and count.
type history struct {
	mu        sync.Mutex
	records   []EventRecord
	start     time.Time
	ageLimit  time.Duration
	permanent time.Duration // records of the first period after start are kept
	maxLen    int
}

func newHistory(start time.Time, cfg Config) *history {
	return &history{start: start, ageLimit: cfg.EventHistoryAgeLimit,
		permanent: cfg.PermanentlyRecordedInitPeriod, maxLen: cfg.MaxHistoryRecords}
}

// add appends r and prunes.
func (h *history) add(r EventRecord, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	h.prune(now)
}

// prune drops records older than the age limit, then the oldest beyond
// maxLen; records started within the initial period stay unless the count
// limit needs them gone.
func (h *history) prune(now time.Time) {
	keepUntil := h.start.Add(h.permanent)
	kept := h.records[:0]
	for _, r := range h.records {
		if r.ProcessingStart.Before(keepUntil) || now.Sub(r.ProcessingEnd) <= h.ageLimit {
			kept = append(kept, r)
		}
	}
	clear(h.records[len(kept):])
	h.records = kept
	if over := len(h.records) - h.maxLen; over > 0 {
		h.records = append(h.records[:0:0], h.records[over:]...)
	}
}

// query selects records; see historyQuery.
func (h *history) query(q historyQuery) []EventRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []EventRecord{}
	for i, r := range h.records {
		if q.match(r, i, len(h.records)) {
			out = append(out, r)
		}
	}
	return out
}

// historyQuery is the parsed query of GET /controller/event-history; the
// first of the set fields wins, in this order.
type historyQuery struct {
	seqNum       *uint64
	since, until *time.Time
	from, to     *uint64
	first, last  *int
}

func (q historyQuery) match(r EventRecord, index, total int) bool {
	switch {
	case q.seqNum != nil:
		return r.SeqNum == *q.seqNum
	case q.since != nil || q.until != nil:
		return (q.since == nil || !r.ProcessingStart.Before(*q.since)) &&
			(q.until == nil || !r.ProcessingStart.After(*q.until))
	case q.from != nil || q.to != nil:
		return (q.from == nil || r.SeqNum >= *q.from) && (q.to == nil || r.SeqNum <= *q.to)
	case q.first != nil:
		return index < *q.first
	case q.last != nil:
		return index >= total-*q.last
	}
	return true
}
