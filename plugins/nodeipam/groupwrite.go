package nodeipam

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

const (
	// maxGroup is the most writes committed in one transaction (etcd
	// allows kvdb.MaxTxnOps).
	maxGroup = 64
	// groupTimeout bounds one group's transaction. A group carries the
	// writes of several callers, so no caller's context may cancel it.
	groupTimeout = 10 * time.Second
)

// groupWriter commits the fenced writes of concurrent callers together, one
// etcd transaction (one round trip, one fsync) per group instead of one per
// write. A caller that finds no commit running becomes the committer: it
// commits the queue in order, a group at a time, until its own write is
// done, then hands the role to the first caller still waiting (or ends it
// when nobody waits). A group holds distinct keys only (etcd refuses a key
// twice in a transaction), so a later write of a key always lands after an
// earlier one. The zero groupWriter is ready; it must not be copied.
type groupWriter struct {
	mu      sync.Mutex
	queue   []*groupOp
	running bool // a committer is at work
}

// groupOp is one queued write; the fields after done are guarded by
// groupWriter.mu.
type groupOp struct {
	key  string
	op   kvdb.Op
	desc string        // "record the claim of node a", for errors
	done chan struct{} // closed once err is set
	err  error
	lead chan struct{} // closed when the caller is made the committer
	// waiting: the caller waits for done or lead; promoted: it was made
	// the committer.
	waiting, promoted bool
}

// write commits op (on key) in a transaction that carries fence with the
// writes queued beside it. A refused transaction wraps ErrLostLead for
// every write of its group. When ctx ends first the error wraps ctx.Err()
// and the write may still be committed later: its outcome is unknown.
func (w *groupWriter) write(ctx context.Context, db kvdb.Broker, fence func() []kvdb.Cmp, key string, op kvdb.Op, desc string) error {
	g := &groupOp{key: key, op: op, desc: desc, done: make(chan struct{}), lead: make(chan struct{})}
	w.mu.Lock()
	w.queue = append(w.queue, g)
	if !w.running {
		w.running = true
		w.mu.Unlock()
		w.commitUntil(ctx, db, fence, g)
		return g.err
	}
	g.waiting = true
	w.mu.Unlock()
	select {
	case <-g.done:
		return g.err
	case <-g.lead:
		w.commitUntil(ctx, db, fence, g)
		return g.err
	case <-ctx.Done():
	}
	w.mu.Lock()
	g.waiting = false
	promoted := g.promoted
	w.mu.Unlock()
	if promoted { // made the committer as ctx ended: the others need it
		w.commitUntil(ctx, db, fence, g)
		return g.err
	}
	return fmt.Errorf("%s: queued, outcome unknown: %w", desc, ctx.Err())
}

// commitUntil commits groups until own is done, then passes the committer
// role on.
func (w *groupWriter) commitUntil(ctx context.Context, db kvdb.Broker, fence func() []kvdb.Cmp, own *groupOp) {
	for {
		w.mu.Lock()
		if isClosed(own.done) && w.handOff() {
			w.mu.Unlock()
			return
		}
		group := w.take()
		w.mu.Unlock()
		commitGroup(ctx, db, fence, group)
	}
}

// handOff makes the first waiting caller the committer, or ends the role
// when the queue is empty; false means only abandoned writes are queued
// and the current committer goes on. The caller holds mu.
func (w *groupWriter) handOff() bool {
	for _, g := range w.queue {
		if g.waiting {
			g.promoted = true
			close(g.lead)
			return true
		}
	}
	if len(w.queue) == 0 {
		w.running = false
		return true
	}
	return false
}

// take removes the next group from the queue: up to maxGroup writes, up to
// the first key already in the group. The caller holds mu.
func (w *groupWriter) take() []*groupOp {
	keys := make(map[string]bool, min(len(w.queue), maxGroup))
	n := 0
	for n < len(w.queue) && n < maxGroup && !keys[w.queue[n].key] {
		keys[w.queue[n].key] = true
		n++
	}
	group := w.queue[:n:n]
	w.queue = w.queue[n:]
	return group
}

// commitGroup writes the group in one fenced transaction and gives every
// write its outcome.
func commitGroup(ctx context.Context, db kvdb.Broker, fence func() []kvdb.Cmp, group []*groupOp) {
	var cmps []kvdb.Cmp
	if fence != nil {
		cmps = fence()
	}
	ops := make([]kvdb.Op, len(group))
	for i, g := range group {
		ops[i] = g.op
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	ok, err := db.Txn(tctx, cmps, ops)
	cancel()
	if err == nil && !ok {
		err = ErrLostLead
	}
	for _, g := range group {
		if err != nil {
			g.err = fmt.Errorf("%s: %w", g.desc, err)
		}
		close(g.done)
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
