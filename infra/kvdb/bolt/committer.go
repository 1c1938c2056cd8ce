package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/bbolt"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// writeReq is one queued write: Put and Delete are single-op requests
// without cmps, Txn carries its own.
type writeReq struct {
	cmps []kvdb.Cmp
	ops  []kvdb.Op
	done chan writeResult // buffered: the committer never blocks on it
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
	// Writes is the number of write requests (Put, Delete, Txn) answered.
	Writes uint64
	// MaxBatch is the largest number of requests committed together.
	MaxBatch uint64
}

type statsCounters struct {
	commits, writes, maxBatch atomic.Uint64
}

func (c *statsCounters) snapshot() Stats {
	return Stats{Commits: c.commits.Load(), Writes: c.writes.Load(), MaxBatch: c.maxBatch.Load()}
}

// errNothingToCommit rolls back a batch that changed nothing, saving the fsync.
var errNothingToCommit = errors.New("nothing to commit")

// write queues a request and waits for its result. The request's slices
// are copied, so the caller may reuse them as soon as write returns. When
// ctx ends after the request was queued, write returns ctx's error and the
// write may or may not be applied.
func (s *store) write(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) writeResult {
	r := &writeReq{cmps: cloneCmps(cmps), ops: cloneOps(ops), done: make(chan writeResult, 1)}
	if s.closed.Load() {
		return writeResult{err: kvdb.ErrClosed}
	}
	select {
	case s.queue <- r:
	case <-s.closing:
		return writeResult{err: kvdb.ErrClosed}
	case <-ctx.Done():
		return writeResult{err: ctx.Err()}
	}
	select {
	case res := <-r.done:
		return res
	case <-ctx.Done():
		return writeResult{err: ctx.Err()}
	case <-s.stopped:
		select {
		case res := <-r.done:
			return res
		default:
			return writeResult{err: kvdb.ErrClosed}
		}
	}
}

// commitLoop is the committer goroutine: it takes the first queued request
// at once (a lone writer waits for nobody), adds whatever else is queued
// by then, up to maxBatch, and commits them together in one transaction.
// Writers that arrive during a commit form the next batch. Once Close has
// begun, queued requests are failed rather than committed.
func (s *store) commitLoop() {
	defer close(s.stopped)
	batch := make([]*writeReq, 0, s.maxBatch)
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
			batch = append(batch[:0], r)
			batch = s.fill(batch)
			s.commit(batch)
		}
	}
}

// fill adds queued requests to batch without waiting.
func (s *store) fill(batch []*writeReq) []*writeReq {
	for len(batch) < s.maxBatch {
		select {
		case r := <-s.queue:
			batch = append(batch, r)
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
			r.done <- writeResult{err: kvdb.ErrClosed}
		default:
			return
		}
	}
}

// commit applies batch in one transaction, publishes the changes to the
// watchers, then answers every request. If the transaction fails, the
// requests are retried one per transaction so that one bad request cannot
// fail the others.
func (s *store) commit(batch []*writeReq) {
	if s.beforeCommit != nil {
		s.beforeCommit(len(batch))
	}
	results, events, err := s.applyBatch(batch)
	if err != nil && len(batch) > 1 {
		s.log.Warn("batch commit failed; retrying its requests one by one", "requests", len(batch), "err", err)
		for _, r := range batch {
			s.commit([]*writeReq{r})
		}
		return
	}
	if err != nil {
		results[0] = writeResult{err: fmt.Errorf("bolt: commit to %q: %w", s.path, err)}
	}
	s.stats.writes.Add(uint64(len(batch)))
	if n := uint64(len(batch)); n > s.stats.maxBatch.Load() {
		s.stats.maxBatch.Store(n) // only the committer writes it
	}
	s.hub.publish(events)
	for i, r := range batch {
		r.done <- results[i]
	}
}

// applyBatch runs every request of batch, in order, in one bbolt
// transaction. Each request that changes something gets the next revision.
func (s *store) applyBatch(batch []*writeReq) ([]writeResult, []kvdb.WatchEvent, error) {
	results := make([]writeResult, len(batch))
	var events []kvdb.WatchEvent
	rev := s.rev
	err := s.db.Update(func(tx *bbolt.Tx) error {
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
		return tx.Bucket(metaBucket).Put(revisionKey, encodeRevision(rev))
	})
	switch {
	case errors.Is(err, errNothingToCommit):
		return results, nil, nil
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
