package ksr

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
)

// statusWatch follows the agents' status records (agentstatus.Prefix) for
// the cluster page: one List, then a Watch from its revision, again after
// a broken watch. It only reads: the agents are the records' writers.
// Every replica runs it, leader or not. Owner: its goroutine (run) writes
// the map under mu; the page's handlers read copies.
type statusWatch struct {
	db  kvdb.Broker
	log *slog.Logger

	mu      sync.Mutex
	nodes   map[string]watchedStatus // by node name (from the key)
	rev     int64                    // the revision the map is at
	synced  bool                     // a List has succeeded
	lastErr string                   // the last List or Watch error ("" after a success)
}

// watchedStatus is one record as read: decoded, or why not.
type watchedStatus struct {
	Status   *agentstatus.Status // nil when Err
	Err      string              // Decode's error, or a key/name mismatch
	Revision int64               // the record's mod revision
}

// statusRetry is the wait before listing again after a failure.
const statusRetry = time.Second

func newStatusWatch(db kvdb.Broker, log *slog.Logger) *statusWatch {
	return &statusWatch{db: db, log: log, nodes: map[string]watchedStatus{}}
}

// run lists and watches until ctx ends.
func (w *statusWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := w.follow(ctx); err != nil && ctx.Err() == nil {
			w.setErr(err)
			w.log.Warn("agent status records: list or watch failed; trying again", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(statusRetry):
		}
	}
}

// follow lists the records, then applies the watch's changes until it
// breaks (nil) or fails to start.
func (w *statusWatch) follow(ctx context.Context) error {
	kvs, rev, err := w.db.List(ctx, agentstatus.Prefix)
	if err != nil {
		return err
	}
	nodes := make(map[string]watchedStatus, len(kvs))
	for _, kv := range kvs {
		if name, ws, ok := parseWatched(kv.Key, kv.Value, kv.Revision); ok {
			nodes[name] = ws
		}
	}
	w.mu.Lock()
	w.nodes, w.rev, w.synced, w.lastErr = nodes, rev, true, ""
	w.mu.Unlock()
	ch, err := w.db.Watch(ctx, agentstatus.Prefix, rev+1)
	if err != nil {
		return err
	}
	for ev := range ch {
		w.apply(ev)
	}
	return nil
}

// apply applies one change.
func (w *statusWatch) apply(ev kvdb.WatchEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rev = max(w.rev, ev.Revision)
	if ev.Type == kvdb.EventDelete {
		if name, err := agentstatus.ParseKey(ev.Key); err == nil {
			delete(w.nodes, name)
		}
		return
	}
	if name, ws, ok := parseWatched(ev.Key, ev.Value, ev.Revision); ok {
		w.nodes[name] = ws
	}
}

// parseWatched decodes one record; ok is false for a key that is not a
// record's (nothing to show under a name).
func parseWatched(key string, value []byte, rev int64) (string, watchedStatus, bool) {
	name, err := agentstatus.ParseKey(key)
	if err != nil {
		return "", watchedStatus{}, false
	}
	st, err := agentstatus.Decode(value)
	switch {
	case err != nil:
		return name, watchedStatus{Err: err.Error(), Revision: rev}, true
	case st.Node != name:
		return name, watchedStatus{Err: "the record names node " + st.Node, Revision: rev}, true
	}
	return name, watchedStatus{Status: st, Revision: rev}, true
}

func (w *statusWatch) setErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = err.Error()
}

// snapshot returns a copy of the records and the watch's state (the
// records are never changed in place: sharing them is safe).
func (w *statusWatch) snapshot() (nodes map[string]watchedStatus, rev int64, synced bool, lastErr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.nodes), w.rev, w.synced, w.lastErr
}
