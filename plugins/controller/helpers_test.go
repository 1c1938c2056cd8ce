package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// call is one handler invocation seen by a testHandler.
type call struct {
	handler, method, event string
	resyncCount            int
}

// journal records calls of every handler in order.
type journal struct {
	mu    sync.Mutex
	calls []call
}

func (j *journal) add(c call) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, c)
}

func (j *journal) list() []call {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]call(nil), j.calls...)
}

// names returns "handler.method" of each call whose event name matches.
func (j *journal) names(event string) []string {
	var out []string
	for _, c := range j.list() {
		if c.event == event {
			out = append(out, c.handler+"."+c.method)
		}
	}
	return out
}

// testHandler puts "<name>/<event>" in every transaction and fails as told.
type testHandler struct {
	name    string
	j       *journal
	mu      sync.Mutex
	fail    map[string]error // method ("Resync", "Update", "Revert") -> error
	onEvent func(ev api.Event, txn api.UpdateOperations) error
	// onResync, when set, runs at the end of Resync.
	onResync func(ev api.Event, txn api.ResyncOperations) error
	ignore   map[string]bool // event names not handled
}

func newHandler(name string, j *journal) *testHandler {
	return &testHandler{name: name, j: j, fail: map[string]error{}, ignore: map[string]bool{}}
}

func (h *testHandler) setFail(method string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail[method] = err
}

func (h *testHandler) failure(method string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fail[method]
}

func (h *testHandler) String() string { return h.name }

func (h *testHandler) HandlesEvent(ev api.Event) bool { return !h.ignore[ev.GetName()] }

func (h *testHandler) Resync(ev api.Event, ks api.KubeStateData, n int, txn api.ResyncOperations) error {
	h.j.add(call{h.name, "Resync", ev.GetName(), n})
	txn.Put(h.name+"/resync", wrapperspb.Int64(int64(ks.Len())))
	if h.onResync != nil {
		if err := h.onResync(ev, txn); err != nil {
			return err
		}
	}
	return h.failure("Resync")
}

func (h *testHandler) Update(ev api.Event, txn api.UpdateOperations) (string, error) {
	h.j.add(call{h.name, "Update", ev.GetName(), 0})
	txn.Put(h.name+"/"+ev.GetName(), wrapperspb.String(ev.String()))
	if h.onEvent != nil {
		if err := h.onEvent(ev, txn); err != nil {
			return "", err
		}
	}
	return h.name + " updated", h.failure("Update")
}

func (h *testHandler) Revert(ev api.Event) error {
	h.j.add(call{h.name, "Revert", ev.GetName(), 0})
	return h.failure("Revert")
}

// testEvent is a configurable update event.
type testEvent struct {
	name     string
	txn      api.UpdateTransactionType
	dir      api.UpdateDirectionType
	blocking bool
	done     chan error
	onDone   func(error) // runs in Done, on the loop's goroutine, before done is sent
}

func newEvent(name string, txn api.UpdateTransactionType) *testEvent {
	return &testEvent{name: name, txn: txn, done: make(chan error, 1)}
}

func (e *testEvent) GetName() string             { return e.name }
func (e *testEvent) String() string              { return e.name + " event" }
func (e *testEvent) Method() api.EventMethodType { return api.Update }
func (e *testEvent) IsBlocking() bool            { return e.blocking }
func (e *testEvent) Done(err error) {
	if e.onDone != nil {
		e.onDone(err)
	}
	e.done <- err
}
func (e *testEvent) TransactionType() api.UpdateTransactionType { return e.txn }
func (e *testEvent) Direction() api.UpdateDirectionType         { return e.dir }

// wait returns the event's outcome.
func (e *testEvent) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-e.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("event %s not processed within 10s", e.name)
		return nil
	}
}

// testObserver records state changes and processed events.
type testObserver struct {
	mu      sync.Mutex
	records []EventRecord
	started bool
	fatal   error
}

func newObserver() *testObserver { return &testObserver{} }

func (o *testObserver) processed(rec *EventRecord, _ error) {
	o.mu.Lock()
	o.records = append(o.records, *rec)
	o.mu.Unlock()
}

func (o *testObserver) stateChanged(started bool, fatal error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started, o.fatal = started, fatal
}

func (o *testObserver) state() (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.started, o.fatal
}

func (o *testObserver) list() []EventRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]EventRecord(nil), o.records...)
}

// eventNames lists the processed events' names.
func (o *testObserver) eventNames() []string {
	var out []string
	for _, r := range o.list() {
		out = append(out, r.Name)
	}
	return out
}

// failingSouthbound fails the first n commits.
type failingSouthbound struct {
	*MemSouthbound
	mu    sync.Mutex
	fails int
	calls int
}

func (f *failingSouthbound) Commit(ctx context.Context, c Commit) error {
	f.mu.Lock()
	f.calls++
	fail := f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if fail {
		return errors.New("southbound refused")
	}
	return f.MemSouthbound.Commit(ctx, c)
}

func testConfig() Config {
	c := DefaultConfig()
	c.DelayRetry = time.Millisecond
	c.MaxRetryAttempts = 2
	c.DelayAfterErrorHealing = 20 * time.Millisecond
	c.StartupResyncDeadline = 10 * time.Second
	return c
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startLoop runs a loop over handlers and stops it at the end of the test.
func startLoop(t *testing.T, cfg Config, sb Southbound, handlers ...api.EventHandler) (*eventLoop, *testObserver) {
	t.Helper()
	obs := newObserver()
	if sb == nil {
		sb = NewMemSouthbound()
	}
	l := newEventLoop(cfg, handlers, sb, discardLog(), obs)
	l.start()
	t.Cleanup(l.stop)
	return l, obs
}

// dbResync is a remote DB resync with one node.
func dbResync() *api.DBResync {
	return &api.DBResync{KubeState: api.KubeStateData{"node": {"k8s/node/n1": wrapperspb.String("n1")}}}
}

func valueOf(m proto.Message) string { return encodeValue(m) }
