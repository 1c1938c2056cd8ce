package controller

import (
	"fmt"
	"sort"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// transaction collects the handlers' changes and follow-ups for one event.
// The loop goroutine owns values; mu guards followUps and finished, so
// that a misplaced PushFollowUp from another goroutine gets an error
// instead of a data race.
type transaction struct {
	values map[string]proto.Message // nil value = delete
	seq    uint64                   // the event's sequence number
	closed func() bool              // tells whether the loop has stopped

	mu        sync.Mutex
	followUps []*queued
	finished  bool
}

var _ api.UpdateOperations = (*transaction)(nil)

func newTransaction(seq uint64, closed func() bool) *transaction {
	return &transaction{values: map[string]proto.Message{}, seq: seq, closed: closed}
}

// Put sets key; a nil value deletes it.
func (t *transaction) Put(key string, value proto.Message) { t.values[key] = value }

// Get returns what this transaction put under key, or nil.
func (t *transaction) Get(key string) proto.Message { return t.values[key] }

// Delete removes key.
func (t *transaction) Delete(key string) { t.values[key] = nil }

// PushFollowUp keeps ev until the event ends (api.FollowUpPusher).
func (t *transaction) PushFollowUp(ev api.Event) error {
	if ev == nil {
		return fmt.Errorf("push follow-up from event %d: nil event", t.seq)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case ev.IsBlocking():
		return fmt.Errorf("push %s from event %d: %w", ev.GetName(), t.seq, api.ErrBlockingFollowUp)
	case t.closed():
		return fmt.Errorf("push %s from event %d: %w", ev.GetName(), t.seq, api.ErrClosedController)
	case t.finished:
		return fmt.Errorf("push %s from event %d: %w", ev.GetName(), t.seq, api.ErrTransactionFinished)
	}
	t.followUps = append(t.followUps, &queued{ev: ev, isFollowUp: true, followUpTo: t.seq})
	return nil
}

// finish refuses further follow-ups and returns those pushed, in order.
func (t *transaction) finish() []*queued {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished = true
	out := t.followUps
	t.followUps = nil
	return out
}

// TxnOp is one operation of a recorded transaction.
type TxnOp struct {
	Key       string
	Operation string // "put" or "delete"
	Value     string `json:",omitempty"` // protojson of the value
}

// ops lists the operations sorted by key.
func (t *transaction) ops() []TxnOp {
	keys := make([]string, 0, len(t.values))
	for k := range t.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]TxnOp, len(keys))
	for i, k := range keys {
		out[i] = TxnOp{Key: k, Operation: "delete"}
		if v := t.values[k]; v != nil {
			out[i].Operation = "put"
			out[i].Value = encodeValue(v)
		}
	}
	return out
}

// encodeValue is compact protojson, or the error text.
func encodeValue(v proto.Message) string {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}
