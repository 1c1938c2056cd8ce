package nodeipam

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// DefaultAgentGrace is how long a node's agent must have been seen gone
// (its presence key absent, without a break) before the CIDRs or pool
// blocks of its deleted Node are freed: the second look comes at least
// this long after the first. The key itself outlives a killed agent by its
// lease TTL (nodesync's -nodesync-presence-ttl, 15s by default).
const DefaultAgentGrace = 5 * time.Second

// Agents tells whether a node's agent may still hold addresses: an agent
// holds its presence key (vppnode.PresenceKey) for as long as it runs.
// Implementations are safe for concurrent use.
type Agents interface {
	// AbsentSince returns since when node's presence key has been known
	// absent without a break. ok is false while the key is present, and
	// while nothing is known (not read yet, or a watch gap): both mean
	// that the agent may hold addresses.
	AbsentSince(node string) (since time.Time, ok bool)
	// Present reads node's presence key from the store now (the fresh
	// look that comes before anything is freed).
	Present(ctx context.Context, node string) (bool, error)
	// Notify calls fn with a node's name each time what is known of its
	// agent changes, and with "" when it may have changed for every node
	// (after a list). fn must not block. stop ends the calls.
	Notify(fn func(node string)) (stop func())
}

// FencedNode is a deleted Node whose CIDRs or pool blocks are kept from
// every other node because its agent may still hold addresses in them.
type FencedNode struct {
	Node string `json:"node"`
	// Blocks are the fenced CIDRs or pool blocks.
	Blocks []string `json:"blocks"`
	// GoneSince is when the Node was seen deleted (or replaced, or not
	// found).
	GoneSince time.Time `json:"goneSince"`
	// AgentGoneSince is since when its agent's presence key has been
	// absent; nil while it is present or not known.
	AgentGoneSince *time.Time `json:"agentGoneSince,omitempty"`
	// Due is when the blocks are freed if the agent stays away (its key
	// is read once more then); nil while the agent is present.
	Due *time.Time `json:"due,omitempty"`
}

// PresenceWatch is the Agents of an etcd: it lists the presence keys
// (vppnode.PresencePrefix) and watches them from that list on. Run it
// (Run) for as long as it is used. Build it with NewPresenceWatch.
type PresenceWatch struct {
	db    kvdb.Broker
	clock clock.PassiveClock
	log   *slog.Logger

	mu       sync.Mutex // guards what follows; Run writes, readers read
	synced   bool       // a list was taken and its watch has not broken since
	listedAt time.Time  // when that list was taken
	present  map[string]bool
	goneAt   map[string]time.Time // deletes seen by the watch since the list
	subs     map[int]func(string)
	nextSub  int
}

var _ Agents = (*PresenceWatch)(nil)

// NewPresenceWatch builds the watch on db (full keys); clk nil is the
// real clock, log nil slog.Default(). Nothing is read before Run.
func NewPresenceWatch(db kvdb.Broker, clk clock.PassiveClock, log *slog.Logger) *PresenceWatch {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &PresenceWatch{db: db, clock: clk, log: log, present: make(map[string]bool),
		goneAt: make(map[string]time.Time), subs: make(map[int]func(string))}
}

// Run lists the presence keys and follows them until ctx ends; a broken
// watch (or a failed list) makes everything unknown until the next list.
func (w *PresenceWatch) Run(ctx context.Context) {
	for ctx.Err() == nil {
		rev, err := w.list(ctx)
		if err != nil {
			w.log.Warn("agents' presence: listing the keys failed; retrying", "prefix", vppnode.PresencePrefix,
				"retry-in", watchRetry, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
			continue
		}
		w.follow(ctx, rev)
		w.mu.Lock()
		w.synced = false
		w.mu.Unlock()
	}
}

// list reads every presence key; a node absent from it counts as absent
// from now on (what happened before a gap is not known).
func (w *PresenceWatch) list(ctx context.Context) (int64, error) {
	kvs, rev, err := w.db.List(ctx, vppnode.PresencePrefix)
	if err != nil {
		return 0, err
	}
	present := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		present[strings.TrimPrefix(kv.Key, vppnode.PresencePrefix)] = true
	}
	w.mu.Lock()
	w.present, w.goneAt = present, make(map[string]time.Time)
	w.synced, w.listedAt = true, w.clock.Now()
	w.mu.Unlock()
	w.notify("")
	return rev, nil
}

// follow applies the watched changes from rev+1 until the watch breaks or
// ctx ends.
func (w *PresenceWatch) follow(ctx context.Context, rev int64) {
	ch, err := w.db.Watch(ctx, vppnode.PresencePrefix, rev+1)
	if err != nil {
		w.log.Warn("agents' presence: watching the keys failed; listing them again", "err", err)
		return
	}
	for ev := range ch {
		node := strings.TrimPrefix(ev.Key, vppnode.PresencePrefix)
		w.mu.Lock()
		if ev.Type == kvdb.EventDelete {
			delete(w.present, node)
			w.goneAt[node] = w.clock.Now()
		} else {
			w.present[node] = true
			delete(w.goneAt, node)
		}
		w.mu.Unlock()
		w.notify(node)
	}
	if ctx.Err() == nil {
		w.log.Info("agents' presence: the watch broke; listing the keys again")
	}
}

// AbsentSince implements Agents.
func (w *PresenceWatch) AbsentSince(node string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.synced || w.present[node] {
		return time.Time{}, false
	}
	if t, ok := w.goneAt[node]; ok {
		return t, true
	}
	return w.listedAt, true
}

// Present implements Agents.
func (w *PresenceWatch) Present(ctx context.Context, node string) (bool, error) {
	_, found, err := w.db.Get(ctx, vppnode.PresenceKey(node))
	if err != nil {
		return false, fmt.Errorf("read the presence of node %s's agent: %w", node, err)
	}
	return found, nil
}

// Notify implements Agents.
func (w *PresenceWatch) Notify(fn func(node string)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextSub
	w.nextSub++
	w.subs[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs, id)
	}
}

func (w *PresenceWatch) notify(node string) {
	w.mu.Lock()
	fns := make([]func(string), 0, len(w.subs))
	for _, fn := range w.subs {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn(node)
	}
}

// fenceDue tells, from what agents know, whether node's fence may lift at
// now: due is when it may (zero while the agent is present or not known).
func fenceDue(agents Agents, node string, grace time.Duration) (absent, due time.Time) {
	since, ok := agents.AbsentSince(node)
	if !ok {
		return time.Time{}, time.Time{}
	}
	return since, since.Add(grace)
}

// timePtr returns &t, nil for the zero time.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
