package keeper

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// outcome is what became of one write.
type outcome int

const (
	// durable: the store holds what the write asked for.
	durable outcome = iota
	// failed: the store does not hold it, and never will.
	failed
	// unknown: the store may hold it; a read ordered after the write
	// could not tell.
	unknown
)

// write is one record to store or delete; done is called on the keeper's
// goroutine once the outcome is known, with the store's error (nil when
// durable at once).
type write struct {
	op   kvdb.Op
	done func(o outcome, err error)
}

// maxBatch bounds the writes of one transaction, with room for the
// cursors (one per family).
const maxBatch = kvdb.MaxTxnOps - 2

// batch collects the writes decided together, each key at most once: one
// request's (stored in one transaction), or a barrier's (stored in
// transactions of at most maxBatch writes).
type batch struct {
	writes []write
	keys   map[string]struct{}
	cursor bool // an allocation moved the cursor
}

func newBatch() *batch { return &batch{keys: map[string]struct{}{}} }

func (b *batch) has(key string) bool {
	_, ok := b.keys[key]
	return ok
}

func (b *batch) full() bool { return len(b.writes) >= maxBatch }

func (b *batch) add(w write) {
	b.writes = append(b.writes, w)
	b.keys[w.op.Key] = struct{}{}
}

// ops lists the batch's operations.
func (b *batch) ops() []kvdb.Op {
	ops := make([]kvdb.Op, len(b.writes))
	for i, w := range b.writes {
		ops[i] = w.op
	}
	return ops
}

// flush stores b (with the cursor, and the stale records still to delete)
// and reports every outcome, on the calling goroutine. Barriers call it,
// with nothing in flight.
func (k *Keeper) flush(b *batch) {
	if len(b.writes) == 0 {
		return
	}
	k.prepare(b)
	k.commit(b.writes)
}

// prepare adds to a batch about to be stored the cursor (when an
// allocation moved it) and the retried deletes of stale records.
func (k *Keeper) prepare(b *batch) {
	if b.cursor && k.tab != nil && !k.tab.externalMode() {
		for i := range k.tab.slots() {
			b.add(write{op: kvdb.PutOp(cursorKey(i), []byte(k.tab.pool(i).Pool().Cursor().String())), done: func(outcome, error) {}})
		}
	}
	k.addRetries(b)
}

// addRetries adds the deletes of stale records that an earlier resync
// could not delete, for keys the batch does not write anyway, while it
// has room.
func (k *Keeper) addRetries(b *batch) {
	for key := range k.retry {
		if len(b.writes) >= kvdb.MaxTxnOps {
			return
		}
		if b.has(key) {
			continue
		}
		b.add(write{op: kvdb.DeleteOp(key), done: func(outcome, error) {}})
	}
}

// commit stores ws on the calling goroutine, in transactions of at most
// kvdb.MaxTxnOps writes, and calls every write's done. Only barriers
// call it: nothing else is in flight, so the transactions queue behind
// nothing of the keeper's.
func (k *Keeper) commit(ws []write) {
	for chunk := range slices.Chunk(ws, kvdb.MaxTxnOps) {
		k.settle(chunk, k.storeNow(chunk))
	}
}

// commitInOrder is commit for writes whose order matters (the deletes of
// a pool's records before the pool list without it): once a transaction
// is not durable, the later ones are not tried (not applied). It returns
// the first error.
func (k *Keeper) commitInOrder(ws []write) error {
	var first error
	for chunk := range slices.Chunk(ws, kvdb.MaxTxnOps) {
		if first != nil {
			k.settle(chunk, k.notApplied(len(chunk), fmt.Errorf("not tried: an earlier transaction failed: %w", first)))
			continue
		}
		res := k.storeNow(chunk)
		k.settle(chunk, res)
		for i, o := range res.outs {
			if o != durable && first == nil {
				first = res.errs[i]
			}
		}
	}
	return first
}

// storeNow stores ws in one transaction and waits for the outcome. The
// transaction joins the store's queue like any (withdrawn if storeTimeout
// ends while it waits there); once the store has taken it, storeNow waits
// for the commit's outcome however long it takes, so that the outcome is
// the store's (a barrier blocks nothing that could go on meanwhile).
func (k *Keeper) storeNow(ws []write) stored {
	if k.db == nil {
		return stored{outs: make([]outcome, len(ws)), errs: make([]error, len(ws))}
	}
	ops := opsOf(ws)
	ctx, cancel := k.ctx()
	defer cancel()
	done := make(chan error, 1)
	if err := k.sub.Submit(ctx, nil, ops, func(_ bool, err error) { done <- err }); err != nil {
		return k.outcomes(ops, err)
	}
	return k.outcomes(ops, <-done)
}

// stored is the outcome of storing a list of writes: one outcome and
// one error (nil when durable at once) per write.
type stored struct {
	outs []outcome
	errs []error
}

// outcomes classifies the result of storing ops in one transaction (see
// kvdb's "Write outcomes"): nil is durable; an error that does not wrap
// kvdb.ErrUnknownOutcome is "not applied", for every write; an unknown
// outcome is resolved write by write with a read the store orders after
// the transaction.
func (k *Keeper) outcomes(ops []kvdb.Op, err error) stored {
	res := stored{outs: make([]outcome, len(ops)), errs: make([]error, len(ops))}
	switch {
	case err == nil:
		return res
	case !errors.Is(err, kvdb.ErrUnknownOutcome):
		k.metrics.storeFailures.WithLabelValues("not applied").Inc()
		for i := range ops {
			res.outs[i], res.errs[i] = failed, err
		}
		return res
	}
	k.metrics.storeFailures.WithLabelValues("unknown").Inc()
	k.log.Warn("storing pod allocations: outcome unknown; reading them back", "writes", len(ops), "error", err)
	for i, op := range ops {
		res.outs[i], res.errs[i] = k.readBack(op), err
	}
	return res
}

// opsOf lists the operations of ws.
func opsOf(ws []write) []kvdb.Op {
	ops := make([]kvdb.Op, len(ws))
	for i, w := range ws {
		ops[i] = w.op
	}
	return ops
}

// settle reports the outcome of every write, on the keeper's goroutine. A
// write that reached the store is no longer stale.
func (k *Keeper) settle(ws []write, res stored) {
	for i, w := range ws {
		if res.outs[i] == durable {
			delete(k.retry, w.op.Key)
		}
		w.done(res.outs[i], res.errs[i])
	}
	k.noteStore(res)
}

// readBack tells whether the store holds what op asked for, with a read
// the store orders after the write of unknown outcome (bolt's reads wait
// for the commit that held it).
func (k *Keeper) readBack(op kvdb.Op) outcome {
	ctx, cancel := k.ctx()
	defer cancel()
	kv, found, err := k.db.Get(ctx, op.Key)
	switch {
	case err != nil:
		k.log.Error("reading back a pod allocation failed: its state is unknown", "key", op.Key, "error", err)
		return unknown
	case op.Kind == kvdb.OpPut && found && bytes.Equal(kv.Value, op.Value):
		return durable
	case op.Kind == kvdb.OpDelete && !found:
		return durable
	}
	return failed
}
