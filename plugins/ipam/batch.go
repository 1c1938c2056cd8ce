package ipam

import (
	"bytes"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// outcome is what became of one write.
type outcome int

const (
	// durable: the store holds what the write asked for.
	durable outcome = iota
	// failed: the store does not hold it.
	failed
	// unknown: the write failed and the store could not be read back.
	unknown
)

// write is one record to store or delete; done is called on the keeper's
// goroutine once the outcome is known, with the store's error (nil when
// durable at the first try).
type write struct {
	op   kvdb.Op
	done func(o outcome, err error)
}

// maxBatch bounds the writes of one batch: they go to the store as one
// transaction, with room for the cursors (one per family).
const maxBatch = kvdb.MaxTxnOps - 2

// batch collects the writes decided together; each key at most once.
type batch struct {
	writes []write
	keys   map[string]struct{}
	cursor bool // an allocation moved the cursor
	// lanes has the lane of every request with a write in the batch (see
	// request.lane), released when the batch's outcome is known.
	lanes []podmodel.ID
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

// flush stores b (with the cursor, and the stale records still to delete)
// and reports every outcome, on the calling goroutine. The keeper calls
// it only while nothing is in flight (the sweep of absent pods).
func (k *keeper) flush(b *batch) {
	if len(b.writes) == 0 {
		return
	}
	k.prepare(b)
	k.commit(b.writes)
}

// prepare adds to a batch about to be stored the cursor (when an
// allocation moved it) and the retried deletes of stale records.
func (k *keeper) prepare(b *batch) {
	if b.cursor && k.tab != nil && !k.tab.externalMode() {
		for i := range k.tab.slots() {
			b.add(write{op: kvdb.PutOp(cursorKey(i), []byte(k.tab.pool(i).Pool().Cursor().String())), done: func(outcome, error) {}})
		}
	}
	k.addRetries(b)
}

// addRetries adds the deletes of stale records that an earlier resync
// could not delete, for keys the batch does not write anyway.
func (k *keeper) addRetries(b *batch) {
	for key := range k.retry {
		if b.full() {
			return
		}
		if b.has(key) {
			continue
		}
		b.add(write{op: kvdb.DeleteOp(key), done: func(outcome, error) {}})
	}
}

// commit stores ws on the calling goroutine and calls every write's
// done (resyncs and sweeps, which run while nothing is in flight).
func (k *keeper) commit(ws []write) {
	k.settle(ws, k.storeAll(ws))
}

// stored is the outcome of storing a list of writes: one outcome and
// one error (nil when durable at the first try) per write.
type stored struct {
	outs []outcome
	errs []error
}

// storeAll stores ws, at most MaxTxnOps per transaction. It touches no
// state of the keeper: the committer goroutine runs it.
func (k *keeper) storeAll(ws []write) stored {
	res := stored{outs: make([]outcome, 0, len(ws)), errs: make([]error, len(ws))}
	for from := 0; from < len(ws); from += kvdb.MaxTxnOps {
		to := min(from+kvdb.MaxTxnOps, len(ws))
		outs, err := k.store(ws[from:to])
		res.outs = append(res.outs, outs...)
		for i := from; i < to; i++ {
			res.errs[i] = err
		}
	}
	return res
}

// settle reports the outcome of every write, on the keeper's goroutine. A
// write that reached the store is no longer stale.
func (k *keeper) settle(ws []write, res stored) {
	for i, w := range ws {
		if res.outs[i] == durable {
			delete(k.retry, w.op.Key)
		}
		w.done(res.outs[i], res.errs[i])
	}
}

// store writes ws in one transaction. When it fails, the outcome of each
// write is read back: the store may have committed it all the same (a
// timeout), and nothing may be freed that the store still holds.
func (k *keeper) store(ws []write) ([]outcome, error) {
	outs := make([]outcome, len(ws))
	if k.db == nil {
		return outs, nil
	}
	ops := make([]kvdb.Op, len(ws))
	for i, w := range ws {
		ops[i] = w.op
	}
	ctx, cancel := k.ctx()
	_, err := k.db.Txn(ctx, nil, ops)
	cancel()
	if err == nil {
		return outs, nil
	}
	k.log.Warn("storing pod allocations failed; reading them back", "writes", len(ws), "error", err)
	for i, w := range ws {
		outs[i] = k.readBack(w.op)
	}
	return outs, err
}

// readBack tells whether the store holds what op asked for.
func (k *keeper) readBack(op kvdb.Op) outcome {
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
