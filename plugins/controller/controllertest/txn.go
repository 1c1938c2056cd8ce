package controllertest

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// Txn records a handler's transaction. The zero value is ready to use.
type Txn struct {
	// OnFollowUp, when set, is called with every follow-up that passes the
	// contract checks; its error is returned to the handler and the event
	// is then not recorded.
	OnFollowUp func(api.Event) error

	mu        sync.Mutex
	values    api.KeyValuePairs // nil value = deleted
	followUps []api.Event
}

var _ api.UpdateOperations = (*Txn)(nil)

// NewTxn returns an empty Txn.
func NewTxn() *Txn { return &Txn{} }

// Put records the desired value of key.
func (t *Txn) Put(key string, value proto.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.values == nil {
		t.values = api.KeyValuePairs{}
	}
	t.values[key] = value
}

// Get returns what this Txn holds for key, or nil.
func (t *Txn) Get(key string) proto.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.values[key]
}

// Delete records the removal of key (a nil value in Values).
func (t *Txn) Delete(key string) { t.Put(key, nil) }

// PushFollowUp refuses a nil or blocking event as the loop does, then
// calls OnFollowUp and records ev.
func (t *Txn) PushFollowUp(ev api.Event) error {
	if ev == nil {
		return errors.New("push follow-up: nil event")
	}
	if ev.IsBlocking() {
		return fmt.Errorf("push %s: %w", ev.GetName(), api.ErrBlockingFollowUp)
	}
	if t.OnFollowUp != nil {
		if err := t.OnFollowUp(ev); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.followUps = append(t.followUps, ev)
	return nil
}

// Values returns a copy of what was put and deleted (nil value = deleted).
func (t *Txn) Values() api.KeyValuePairs {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := maps.Clone(t.values)
	if out == nil {
		out = api.KeyValuePairs{}
	}
	return out
}

// FollowUps returns the recorded follow-ups in push order.
func (t *Txn) FollowUps() []api.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]api.Event(nil), t.followUps...)
}
