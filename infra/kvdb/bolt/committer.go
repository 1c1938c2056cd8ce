package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/bbolt"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// The states of a write request. A request leaves reqQueued exactly once,
// by a compare-and-swap: the committer takes it (reqTaken: it will be
// committed, or fail in the commit), or its caller's context withdraws it
// (reqWithdrawn: it is never applied). Whoever wins the swap answers it.
const (
	reqQueued int32 = iota
	reqTaken
	reqWithdrawn
)

// writeReq is one queued write: Put and Delete are single-op requests
// without cmps, Txn carries its own.
type writeReq struct {
	cmps []kvdb.Cmp
	ops  []kvdb.Op

	state atomic.Int32
	batch uint64 // the batch that took it; set before state becomes reqTaken

	// Exactly one of done and notify is set. done (buffered: the
	// committer never blocks on it) answers a blocking write; notify
	// answers a Submit, on the committer's goroutine or the one that
	// withdrew it.
	done   chan writeResult
	notify func(writeResult)
	// unwatch stops the withdrawal of a Submit when its context ends.
	unwatch func() bool
}

// answer delivers the request's outcome (exactly once: the caller is the
// winner of the request's state swap).
func (r *writeReq) answer(res writeResult) {
	if r.notify != nil {
		r.notify(res)
		return
	}
	r.done <- res
}

// writeResult answers one writeReq.
type writeResult struct {
	succeeded bool // every cmp held and the ops were applied
	deleted   int  // keys that existed and were deleted
	err       error
}

// Stats counts the committer's work since the database was opened.
type Stats struct {
	// Commits is the number of write transactions committed to the file,
	// each with one fsync. Batches in which nothing changed (only failed
	// compares) are rolled back and not counted.
	Commits uint64
	// Writes is the number of write requests (Put, Delete, Txn, Submit)
	// the committer answered.
	Writes uint64
	// MaxBatch is the largest number of requests committed together.
	MaxBatch uint64
	// Withdrawn is the number of writes whose context ended while they
	// were queued: they were never applied.
	Withdrawn uint64
	// Unknown is the number of writes answered with
	// kvdb.ErrUnknownOutcome.
	Unknown uint64
}

type statsCounters struct {
	commits, writes, maxBatch, withdrawn, unknown atomic.Uint64
}

func (c *statsCounters) snapshot() Stats {
	return Stats{Commits: c.commits.Load(), Writes: c.writes.Load(), MaxBatch: c.maxBatch.Load(),
		Withdrawn: c.withdrawn.Load(), Unknown: c.unknown.Load()}
}

// errNothingToCommit rolls back a batch that changed nothing, saving the fsync.
var errNothingToCommit = errors.New("nothing to commit")

// progress tracks the batches the committer has finished, so that a read
// can wait for the commit of a write whose outcome its caller did not
// learn (see settle).
type progress struct {
	done    atomic.Uint64 // the last batch whose commit has returned
	unknown atomic.Uint64 // the last batch holding a write answered as unknown

	mu   sync.Mutex
	tick chan struct{} // closed and replaced when a batch finishes
}

func newProgress() *progress { return &progress{tick: make(chan struct{})} }

// finished records that batch has been committed (or failed).
func (p *progress) finished(batch uint64) {
	p.done.Store(batch)
	p.mu.Lock()
	close(p.tick)
	p.tick = make(chan struct{})
	p.mu.Unlock()
}

// unknownIn notes that a write of batch was answered as unknown.
func (p *progress) unknownIn(batch uint64) {
	for {
		cur := p.unknown.Load()
		if cur >= batch || p.unknown.CompareAndSwap(cur, batch) {
			return
		}
	}
}

// wait returns once every batch holding a write answered as unknown has
// finished, or with ctx's error, or ErrClosed when the committer stopped.
func (p *progress) wait(ctx context.Context, stopped <-chan struct{}) error {
	for {
		want := p.unknown.Load()
		if p.done.Load() >= want {
			return nil
		}
		p.mu.Lock()
		tick := p.tick
		p.mu.Unlock()
		if p.done.Load() >= want {
			return nil
		}
		select {
		case <-tick:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the commit of a write of unknown outcome: %w", ctx.Err())
		case <-stopped:
			return kvdb.ErrClosed
		}
	}
}

// write queues a request and waits for its result. The request's slices
// are copied, so the caller may reuse them as soon as write returns. When
// ctx ends while the request is still queued, it is withdrawn and never
// applied; when it ends during the commit that took it, write returns an
// error wrapping kvdb.ErrUnknownOutcome, and every read started after
// that waits for the commit (see settle).
func (s *store) write(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) writeResult {
	if err := s.usable(); err != nil {
		return writeResult{err: err}
	}
	if err := ctx.Err(); err != nil {
		return writeResult{err: notApplied(err)}
	}
	r := &writeReq{cmps: cloneCmps(cmps), ops: cloneOps(ops), done: make(chan writeResult, 1)}
	select {
	case s.queue <- r:
	case <-s.closing:
		return writeResult{err: kvdb.ErrClosed}
	case <-ctx.Done():
		return writeResult{err: notApplied(ctx.Err())}
	}
	select {
	case res := <-r.done:
		return res
	case <-ctx.Done():
		return s.abandon(ctx, r)
	case <-s.stopped:
		select {
		case res := <-r.done:
			return res
		default:
			return writeResult{err: kvdb.ErrClosed}
		}
	}
}

// abandon answers a blocking write whose ctx ended: its outcome if known
// by now, withdrawn if still queued, else unknown.
func (s *store) abandon(ctx context.Context, r *writeReq) writeResult {
	select {
	case res := <-r.done: // an outcome known already wins over an ended ctx
		return res
	default:
	}
	if r.state.CompareAndSwap(reqQueued, reqWithdrawn) {
		s.stats.withdrawn.Add(1)
		return writeResult{err: notApplied(ctx.Err())}
	}
	s.progress.unknownIn(r.batch)
	s.stats.unknown.Add(1)
	return writeResult{err: fmt.Errorf("%w: the context ended while the commit holding the write was under way (%w)",
		kvdb.ErrUnknownOutcome, ctx.Err())}
}

// notApplied is the error of a write withdrawn (or never queued) because
// its context ended.
func notApplied(err error) error {
	return fmt.Errorf("not applied: the context ended before the write was committed: %w", err)
}

// errQueueFull answers a Submit while the write queue is full.
var errQueueFull = errors.New("the write queue is full")

// submit queues a write without waiting for it (kvdb.Submitter): done is
// called exactly once with the outcome. While the request is queued, the
// end of ctx withdraws it (done hears "not applied" at once); once the
// committer has taken it, done hears the commit's outcome, whenever that
// comes. submit fails without queuing when the store is closed, ctx has
// ended or the queue is full (wrapping kvdb.ErrBusy).
func (s *store) submit(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op, done func(succeeded bool, err error)) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return notApplied(err)
	}
	r := &writeReq{cmps: cloneCmps(cmps), ops: cloneOps(ops)}
	r.notify = func(res writeResult) { done(res.succeeded, res.err) }
	r.unwatch = context.AfterFunc(ctx, func() {
		if r.state.CompareAndSwap(reqQueued, reqWithdrawn) {
			s.stats.withdrawn.Add(1)
			r.answer(writeResult{err: notApplied(ctx.Err())})
		}
	})
	select {
	case s.queue <- r:
		return nil
	default:
	}
	// Not queued: nobody else can answer r, so withdraw it silently.
	r.unwatch()
	if s.closed.Load() {
		return kvdb.ErrClosed
	}
	return fmt.Errorf("%w: %w (%d writes waiting)", kvdb.ErrBusy, errQueueFull, cap(s.queue))
}

// take claims r for batch: false when its caller withdrew it first.
func (s *store) take(r *writeReq, batch uint64) bool {
	r.batch = batch
	if !r.state.CompareAndSwap(reqQueued, reqTaken) {
		return false
	}
	if r.unwatch != nil {
		r.unwatch()
	}
	return true
}

// commitLoop is the committer goroutine: it takes the first queued request
// at once (a lone writer waits for nobody), adds whatever else is queued
// by then, up to maxBatch, and commits them together in one transaction.
// Writers that arrive during a commit form the next batch. Once Close has
// begun, queued requests are failed rather than committed.
func (s *store) commitLoop() {
	defer close(s.stopped)
	batch := make([]*writeReq, 0, s.maxBatch)
	var seq uint64
	for {
		select {
		case <-s.closing:
			s.failQueued()
			return
		default:
		}
		select {
		case <-s.closing:
			s.failQueued()
			return
		case r := <-s.queue:
			seq++
			batch = batch[:0]
			if s.take(r, seq) {
				batch = append(batch, r)
			}
			batch = s.fill(batch, seq)
			if len(batch) > 0 {
				s.commit(batch)
			}
			s.progress.finished(seq)
		}
	}
}

// fill adds queued requests to batch without waiting, skipping withdrawn
// ones.
func (s *store) fill(batch []*writeReq, seq uint64) []*writeReq {
	for len(batch) < s.maxBatch {
		select {
		case r := <-s.queue:
			if s.take(r, seq) {
				batch = append(batch, r)
			}
		default:
			return batch
		}
	}
	return batch
}

// failQueued answers every queued request with ErrClosed.
func (s *store) failQueued() {
	for {
		select {
		case r := <-s.queue:
			if r.state.CompareAndSwap(reqQueued, reqTaken) {
				if r.unwatch != nil {
					r.unwatch()
				}
				r.answer(writeResult{err: kvdb.ErrClosed})
			}
		default:
			return
		}
	}
}

// commit applies batch in one transaction, publishes the changes to the
// watchers, then answers every request. If a request cannot be applied
// (the transaction is rolled back before its commit), the requests are
// retried one per transaction so that one bad request cannot fail the
// others. A failed commit is settled by commitFailed.
func (s *store) commit(batch []*writeReq) {
	if s.beforeCommit != nil {
		s.beforeCommit(len(batch))
	}
	if reason := s.failed.Load(); reason != nil {
		for _, r := range batch { // queued before the store failed: not applied
			r.answer(writeResult{err: fmt.Errorf("bolt: not applied: %w: %w", kvdb.ErrStoreFailed, *reason)})
		}
		return
	}
	results, events, err := s.applyBatch(batch)
	var ce *commitError
	switch {
	case errors.As(err, &ce):
		results = s.commitFailed(batch, ce.err, ce.txid)
	case err != nil && len(batch) > 1:
		s.log.Warn("batch commit failed; retrying its requests one by one", "requests", len(batch), "err", err)
		for _, r := range batch {
			s.commit([]*writeReq{r})
		}
		return
	case err != nil:
		results[0] = writeResult{err: fmt.Errorf("bolt: not applied: %w", err)}
	}
	s.stats.writes.Add(uint64(len(batch)))
	if n := uint64(len(batch)); n > s.stats.maxBatch.Load() {
		s.stats.maxBatch.Store(n) // only the committer writes it
	}
	s.hub.publish(events)
	for i, r := range batch {
		r.answer(results[i])
	}
}

// commitError is an error of bbolt's commit itself (writing the pages or
// the meta page, or syncing them), as opposed to one of applying the
// requests, which rolls the transaction back before anything is written.
type commitError struct {
	err  error
	txid uint64 // the transaction whose commit failed
}

func (e *commitError) Error() string { return e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// applyBatch runs every request of batch, in order, in one bbolt
// transaction. Each request that changes something gets the next revision.
func (s *store) applyBatch(batch []*writeReq) ([]writeResult, []kvdb.WatchEvent, error) {
	results := make([]writeResult, len(batch))
	var events []kvdb.WatchEvent
	rev := s.rev
	applied := false // every request was applied: an error now is the commit's
	var txid uint64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		txid = uint64(tx.ID())
		root := tx.Bucket(rootBucket)
		for i, r := range batch {
			res, evs, err := apply(root, r, rev+1)
			if err != nil {
				return err
			}
			if len(evs) > 0 {
				rev++
				events = append(events, evs...)
			}
			results[i] = res
		}
		if rev == s.rev {
			return errNothingToCommit
		}
		if err := tx.Bucket(metaBucket).Put(revisionKey, encodeRevision(rev)); err != nil {
			return err
		}
		applied = true
		return nil
	})
	switch {
	case errors.Is(err, errNothingToCommit):
		return results, nil, nil
	case err != nil && applied:
		return results, nil, &commitError{err: err, txid: txid}
	case err != nil:
		return results, nil, err
	}
	s.rev = rev
	s.stats.commits.Add(1)
	return results, events, nil
}

// apply runs one request inside the batch transaction: if every cmp holds,
// it applies the ops at revision rev and returns their events.
func apply(root *bbolt.Bucket, r *writeReq, rev int64) (writeResult, []kvdb.WatchEvent, error) {
	for _, c := range r.cmps {
		if !holds(root, c) {
			return writeResult{}, nil, nil
		}
	}
	res := writeResult{succeeded: true}
	var events []kvdb.WatchEvent
	for _, op := range r.ops {
		key := []byte(op.Key)
		_, prev, existed := decodeValue(root.Get(key))
		switch op.Kind {
		case kvdb.OpPut:
			if err := root.Put(key, encodeValue(rev, op.Value)); err != nil {
				return writeResult{}, nil, fmt.Errorf("put %q: %w", op.Key, err)
			}
			events = append(events, kvdb.WatchEvent{Type: kvdb.EventPut, Key: op.Key, Value: op.Value, PrevValue: prev, Revision: rev})
		case kvdb.OpDelete:
			if !existed {
				continue
			}
			if err := root.Delete(key); err != nil {
				return writeResult{}, nil, fmt.Errorf("delete %q: %w", op.Key, err)
			}
			res.deleted++
			events = append(events, kvdb.WatchEvent{Type: kvdb.EventDelete, Key: op.Key, PrevValue: prev, Revision: rev})
		}
	}
	return res, events, nil
}

// holds evaluates one cmp against the transaction's current state, which
// includes the writes of earlier requests in the same batch.
func holds(root *bbolt.Bucket, c kvdb.Cmp) bool {
	modRev, value, exists := decodeValue(root.Get([]byte(c.Key)))
	switch c.Kind {
	case kvdb.CmpValue:
		return exists && bytes.Equal(value, c.Value)
	case kvdb.CmpAbsent:
		return !exists
	case kvdb.CmpModRevision:
		return modRev == c.Revision
	}
	return false
}

func cloneCmps(cmps []kvdb.Cmp) []kvdb.Cmp {
	out := make([]kvdb.Cmp, len(cmps))
	for i, c := range cmps {
		c.Value = bytes.Clone(c.Value)
		out[i] = c
	}
	return out
}

// cloneOps copies ops; put values become non-nil so that a stored empty
// value reads back as an empty slice.
func cloneOps(ops []kvdb.Op) []kvdb.Op {
	out := make([]kvdb.Op, len(ops))
	for i, op := range ops {
		if op.Kind == kvdb.OpPut {
			op.Value = append([]byte{}, op.Value...)
		}
		out[i] = op
	}
	return out
}
