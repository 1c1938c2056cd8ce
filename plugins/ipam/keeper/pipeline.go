package keeper

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// pipeline is the keeper's state between deciding and storing. The keeper
// goroutine decides one request at a time in memory and hands the writes
// of each decision, as one transaction, to the store's write queue
// (kvdb.Submitter: bolt's committer, the one layer that groups writes: the
// transactions queued during one commit share the next commit's fsync).
// The store reports each outcome back on results; the keeper goroutine
// then runs the writes' done callbacks (every state change stays on it).
//
// Owned by the keeper goroutine, but results (the store's callbacks send
// on it) and waiting (read by tests).
type pipeline struct {
	inflight int                    // transactions handed to the store, outcome not back yet
	flying   map[*batch]podmodel.ID // those transactions, with their lanes
	results  chan settlement        // their outcomes; room for maxInflight
	deferred []*Request             // requests whose lane is busy, in arrival order
	// pending counts the transactions in flight per lane, queued the
	// deferred requests per lane.
	pending  map[podmodel.ID]int
	queued   map[podmodel.ID]int
	barrier  *Request     // a barrier request waiting for an idle pipeline
	sweepDue bool         // the sweep timer fired; the sweep waits like a barrier
	rearm    bool         // a barrier or a sweep ran: set the sweep timer again
	waiting  atomic.Int64 // requests held (publishWaiting)
	// flightCount mirrors inflight for other goroutines (tests).
	flightCount atomic.Int64
}

// settlement is the outcome of one transaction the keeper handed to the
// store.
type settlement struct {
	b    *batch
	lane podmodel.ID
	res  stored
}

// The bounds of what the keeper holds (no request waits in an unbounded
// slice): queueLen requests in its channel, maxDeferred requests deferred
// behind a busy lane, maxInflight transactions in the store's queue. A
// caller that may be refused (CNI ADD and DEL, the pod-ID API) is told
// to try again later when the channel or the deferred list is full; the
// event loop's own requests (resyncs, Kubernetes pod events) wait.
const (
	queueLen    = 1024
	maxDeferred = 256
	maxInflight = 1024
)

func newPipeline() pipeline {
	return pipeline{
		results: make(chan settlement, maxInflight),
		flying:  map[*batch]podmodel.ID{},
		pending: map[podmodel.ID]int{},
		queued:  map[podmodel.ID]int{},
	}
}

// idle: nothing in flight, nothing deferred.
func (p *pipeline) idle() bool { return p.inflight == 0 && len(p.deferred) == 0 }

// publishWaiting counts, for the tests, the requests the keeper holds
// undecided: deferred or held as a barrier, and a due sweep.
func (p *pipeline) publishWaiting() {
	p.flightCount.Store(int64(p.inflight))
	n := len(p.deferred)
	if p.barrier != nil {
		n++
	}
	if p.sweepDue {
		n++
	}
	p.waiting.Store(int64(n))
}

// intake is the channel of new requests, or nil (a nil channel is never
// ready) while a barrier or a sweep waits for the pipeline to drain or
// the store's queue holds maxInflight of the keeper's transactions: new
// requests stay queued behind them.
func (k *Keeper) intake() chan *Request {
	p := &k.pipe
	if p.barrier != nil || p.sweepDue || p.inflight >= maxInflight {
		return nil
	}
	return k.reqs
}

// take places a request taken from the channel: a barrier waits for an
// idle pipeline, a request whose lane is busy is deferred (or, when
// maxDeferred are, refused if it may be), any other is decided at once.
// A request whose caller has given up is dropped: it is never decided
// after the fact.
func (k *Keeper) take(r *Request) {
	p := &k.pipe
	if k.abandoned(r) {
		return
	}
	if r.Kind == ReqConfirm {
		r.Pod = k.confirmLane(r)
	}
	switch {
	case r.Kind == reqInspect:
		if k.tab != nil {
			r.read(k.tab)
		}
		r.answer(Reply{})
	case r.Kind.barrier():
		p.barrier = r
	case k.busy(r) && r.MayRefuse && len(p.deferred) >= maxDeferred:
		k.refuse(r, "queue", fmt.Errorf("%d requests wait behind the writes in flight already", len(p.deferred)))
	case k.busy(r):
		p.deferred = append(p.deferred, r)
		p.queued[r.lane()]++
	default:
		k.decideNow(r)
	}
}

// abandoned answers a request whose caller's context has ended, and tells
// whether it did: such a request is never decided (a CNI ADD whose caller
// gave up must not allocate after the DEL the runtime sends next).
func (k *Keeper) abandoned(r *Request) bool {
	if r.Ctx == nil || r.Ctx.Err() == nil {
		return false
	}
	r.answer(Reply{Err: fmt.Errorf("dropped before it was decided: %w", context.Cause(r.Ctx))})
	return true
}

// refuse answers r "try again later" without deciding it.
func (k *Keeper) refuse(r *Request, reason string, why error) {
	k.metrics.refused.WithLabelValues(reason).Inc()
	r.answer(Reply{Err: fmt.Errorf("%w: IPAM is busy (%v)", podmanager.ErrTryAgain, why)})
}

// takeQueued takes the requests queued by now, without waiting, so that
// they are decided while the store commits.
func (k *Keeper) takeQueued() {
	for n := 0; n < maxServe && k.intake() != nil && !k.stopping(); n++ {
		select {
		case r := <-k.reqs:
			k.take(r)
		default:
			return
		}
	}
}

// busy tells whether r must wait: an earlier request of its lane is
// deferred, or (for a kind that waits for writes) its lane has a
// transaction in flight.
func (k *Keeper) busy(r *Request) bool {
	p := &k.pipe
	return p.queued[r.lane()] > 0 || (r.Kind.waitsForWrites() && p.pending[r.lane()] > 0)
}

// decideNow decides r; the writes it decides go to the store as one
// transaction, and its lane is busy until the outcome is back.
func (k *Keeper) decideNow(r *Request) {
	if r.Kind.notes() {
		k.note(r)
		k.noteEvidence()
		r.answer(Reply{})
		return
	}
	b := newBatch()
	k.decide(r, b)
	if len(b.writes) > 0 {
		k.send(b, r)
	}
}

// send hands b, the writes of r's decision, to the store as one
// transaction. While it waits in the store's queue, the end of r's
// context or of storeTimeout withdraws it (not applied: the decision is
// undone); once the store has taken it, its outcome is the commit's.
// Without a store (memory is the store) it is settled at once.
func (k *Keeper) send(b *batch, r *Request) {
	k.prepare(b)
	k.sendBatch(b, r.Ctx, r.lane())
}

// sendBatch hands b to the store as one transaction in lane (see send);
// parent (nil: none) may withdraw it.
func (k *Keeper) sendBatch(b *batch, parent context.Context, lane podmodel.ID) {
	if k.db == nil {
		k.settle(b.writes, stored{outs: make([]outcome, len(b.writes)), errs: make([]error, len(b.writes))})
		return
	}
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, k.cfg.StoreTimeout)
	ops := b.ops()
	results := k.pipe.results
	// In flight before Submit: the outcome may come back at once (it is
	// read on this goroutine, after send returns).
	k.fly(b, lane)
	err := k.sub.Submit(ctx, nil, ops, func(_ bool, err error) {
		cancel()
		results <- settlement{b: b, lane: lane, res: stored{errs: []error{err}}}
	})
	if err != nil {
		cancel()
		k.land(b, lane)
		if errors.Is(err, kvdb.ErrBusy) {
			k.metrics.refused.WithLabelValues("store").Inc()
			err = fmt.Errorf("%w: the store did not take the write: %w", podmanager.ErrTryAgain, err)
		}
		k.settle(b.writes, k.notApplied(len(b.writes), err))
	}
}

// fly counts b in flight in its lane; land forgets it.
func (k *Keeper) fly(b *batch, lane podmodel.ID) {
	p := &k.pipe
	p.inflight++
	p.flying[b] = lane
	p.pending[lane]++
}

func (k *Keeper) land(b *batch, lane podmodel.ID) {
	p := &k.pipe
	delete(p.flying, b)
	p.inflight--
	if p.pending[lane]--; p.pending[lane] <= 0 {
		delete(p.pending, lane)
	}
}

// notApplied is the outcome of n writes the store refused.
func (k *Keeper) notApplied(n int, err error) stored {
	res := stored{outs: make([]outcome, n), errs: make([]error, n)}
	for i := range res.outs {
		res.outs[i], res.errs[i] = failed, err
	}
	return res
}

// finish settles a transaction whose outcome the store reported, and
// frees its lane. An unknown outcome is resolved first, write by write,
// with reads the store orders after the transaction (off the keeper's
// goroutine: such a read may wait for a stalled commit).
func (k *Keeper) finish(s settlement) {
	if len(s.res.outs) == 0 {
		err := s.res.errs[0]
		ops := s.b.ops()
		if kvdbUnknown(err) {
			results := k.pipe.results
			go func() { s.res = k.outcomes(ops, err); results <- s }()
			return
		}
		s.res = k.outcomes(ops, err)
	}
	if _, ok := k.pipe.flying[s.b]; !ok {
		return // settled by a shutdown that could not wait for it
	}
	k.land(s.b, s.lane)
	k.settle(s.b.writes, s.res)
}

// drainInflight waits, for at most storeTimeout, for the outcomes of the
// transactions in flight and settles them; those still out then are
// settled as unknown (their callers get an error: the store may still
// apply them, and a restart reads what it holds).
func (k *Keeper) drainInflight() {
	p := &k.pipe
	if p.inflight == 0 {
		return
	}
	timeout := time.NewTimer(k.cfg.StoreTimeout) // real time: a fake clock may stand still
	defer timeout.Stop()
	for p.inflight > 0 {
		select {
		case s := <-p.results:
			k.finish(s)
		case <-timeout.C:
			for b, lane := range p.flying {
				k.finish(settlement{b: b, lane: lane, res: k.unknownOutcome(len(b.writes), ErrClosed)})
			}
			return
		}
	}
}

// unknownOutcome is the outcome of n writes whose fate is not known.
func (k *Keeper) unknownOutcome(n int, err error) stored {
	res := stored{outs: make([]outcome, n), errs: make([]error, n)}
	for i := range res.outs {
		res.outs[i], res.errs[i] = unknown, err
	}
	return res
}

// kvdbUnknown tells whether a store error leaves the outcome unknown.
func kvdbUnknown(err error) bool { return errors.Is(err, kvdb.ErrUnknownOutcome) }

// advance moves the pipeline on as far as it can without waiting:
// deferred requests whose lane is free are decided, and once the
// pipeline is idle a waiting barrier runs, then a due sweep.
func (k *Keeper) advance() {
	p := &k.pipe
	k.undefer()
	if !p.idle() {
		return
	}
	if r := p.barrier; r != nil {
		p.barrier = nil
		p.rearm = true
		if !k.abandoned(r) {
			k.runNow(r)
		}
	}
	if p.sweepDue {
		p.sweepDue, p.rearm = false, true
		k.runSweep()
	}
	if k.probe.due && k.db != nil {
		k.runProbe()
	}
}

// runSweep releases what the sweep timer made due: absent pods, expired
// reservations and cooldowns, empty blocks.
func (k *Keeper) runSweep() {
	k.releaseAbsent()
	k.releaseExpired()
	if k.tab != nil {
		k.warmUp()
		k.shrink()
	}
}

// rearmSweep sets the sweep timer when it is not set, and after a
// barrier or a sweep. armSweep scans every absent pod, so it does not run
// for every request: between barriers and sweeps the absent pods only
// change in ways that need no earlier timer. A pod becomes absent "now",
// after every pod already absent; a pod that stops being absent may leave
// the timer early, and an early sweep releases nothing and sets the
// timer again.
func (k *Keeper) rearmSweep() {
	p := &k.pipe
	if p.sweepDue || (!p.rearm && k.sweep.c != nil) {
		return
	}
	p.rearm = false
	k.armSweep()
}

// undefer decides, in arrival order, the deferred requests that need no
// longer wait; a request stays deferred behind an earlier one of its
// lane.
func (k *Keeper) undefer() {
	p := &k.pipe
	if len(p.deferred) == 0 {
		return
	}
	held := map[podmodel.ID]struct{}{}
	keep := p.deferred[:0]
	for _, r := range p.deferred {
		lane := r.lane()
		_, behind := held[lane]
		if behind || (r.Kind.waitsForWrites() && p.pending[lane] > 0) {
			held[lane] = struct{}{}
			keep = append(keep, r)
			continue
		}
		k.unqueue(lane)
		if !k.abandoned(r) {
			k.decideNow(r)
		}
	}
	clear(p.deferred[len(keep):])
	p.deferred = keep
}

// unqueue counts one deferred request of lane less.
func (k *Keeper) unqueue(lane podmodel.ID) {
	if k.pipe.queued[lane]--; k.pipe.queued[lane] <= 0 {
		delete(k.pipe.queued, lane)
	}
}

// shutdown ends the pipeline when close has begun: the transactions in
// flight get their outcome (for at most storeTimeout: a store that does
// not answer by then leaves their callers with an error of unknown
// outcome), and the deferred requests, a waiting barrier and the requests
// still queued fail with errClosed. No caller is left waiting.
func (k *Keeper) shutdown() {
	p := &k.pipe
	k.drainInflight()
	for _, r := range p.deferred {
		r.answer(Reply{Err: ErrClosed})
	}
	p.deferred, p.queued = nil, map[podmodel.ID]int{}
	if p.barrier != nil {
		p.barrier.answer(Reply{Err: ErrClosed})
		p.barrier = nil
	}
	k.failQueued()
	p.publishWaiting()
}
