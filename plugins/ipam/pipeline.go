package ipam

import (
	"sync/atomic"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// pipeline is the keeper's state between deciding and storing: the keeper
// goroutine decides requests into the open batch while at most one batch
// (inflight) is being committed by a committer goroutine, which only
// stores the writes it is given and sends their outcomes on results. All
// state changes, the writes' done callbacks included, stay on the keeper
// goroutine. Group commit follows: the next batch holds everything
// decided during the previous commit.
//
// Owned by the keeper goroutine, but results (the committer sends on it)
// and waiting (read by tests).
type pipeline struct {
	open     *batch              // decided, not sent to the store yet
	inflight *batch              // being committed; nil when none
	results  chan stored         // the outcome of inflight; one slot
	deferred []*request          // requests whose lane is busy, in arrival order
	pending  map[podmodel.ID]int // writes in open or inflight, per lane
	queued   map[podmodel.ID]int // deferred requests, per lane
	barrier  *request            // a barrier request waiting for an idle pipeline
	sweepDue bool                // the sweep timer fired; the sweep waits like a barrier
	rearm    bool                // a barrier or a sweep ran: set the sweep timer again
	waiting  atomic.Int64        // work waiting behind the commit in flight (publishWaiting)
}

func newPipeline() pipeline {
	return pipeline{
		open:    newBatch(),
		results: make(chan stored, 1),
		pending: map[podmodel.ID]int{},
		queued:  map[podmodel.ID]int{},
	}
}

// idle: nothing in flight, nothing decided but unstored, nothing deferred.
func (p *pipeline) idle() bool {
	return p.inflight == nil && len(p.open.writes) == 0 && len(p.deferred) == 0
}

// publishWaiting counts, for the tests, the work that waits behind the
// commit in flight: requests taken from the channel (deferred, held as a
// barrier, or decided into the open batch) and a due sweep.
func (p *pipeline) publishWaiting() {
	n := len(p.deferred) + len(p.open.lanes)
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
// the open batch is full: new requests stay queued behind them.
func (k *keeper) intake() chan *request {
	p := &k.pipe
	if p.barrier != nil || p.sweepDue || p.open.full() {
		return nil
	}
	return k.reqs
}

// take places a request taken from the channel: a barrier waits for an
// idle pipeline, a request whose lane is busy is deferred, any other is
// decided at once.
func (k *keeper) take(r *request) {
	p := &k.pipe
	if r.kind == reqConfirm {
		r.pod = k.confirmLane(r)
	}
	switch {
	case r.kind.barrier():
		p.barrier = r
	case k.busy(r):
		p.deferred = append(p.deferred, r)
		p.queued[r.lane()]++
	default:
		k.decideNow(r)
	}
}

// takeQueued takes the requests queued by now, without waiting, so that
// they join the open batch before it is sent.
func (k *keeper) takeQueued() {
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
// deferred, or (for a kind that waits for writes) its lane has a write
// pending.
func (k *keeper) busy(r *request) bool {
	p := &k.pipe
	return p.queued[r.lane()] > 0 || (r.kind.waitsForWrites() && p.pending[r.lane()] > 0)
}

// decideNow decides r into the open batch; a write it adds makes its
// lane busy until the batch's outcome is known.
func (k *keeper) decideNow(r *request) {
	if r.kind == reqPodSeen {
		k.seen(r.pod)
		r.answer(reply{})
		return
	}
	b := k.pipe.open
	n := len(b.writes)
	k.decide(r, b)
	if len(b.writes) > n {
		b.lanes = append(b.lanes, r.lane())
		k.pipe.pending[r.lane()]++
	}
}

// advance moves the pipeline on as far as it can without waiting:
// deferred requests whose lane is free are decided, the open batch is
// sent when nothing is in flight, and once the pipeline is idle a
// waiting barrier runs, then a due sweep.
func (k *keeper) advance() {
	p := &k.pipe
	k.undefer()
	if p.inflight != nil {
		return
	}
	if len(p.open.writes) > 0 {
		k.dispatch()
		return
	}
	if !p.idle() {
		return
	}
	if r := p.barrier; r != nil {
		p.barrier = nil
		p.rearm = true
		k.runNow(r)
	}
	if p.sweepDue {
		p.sweepDue, p.rearm = false, true
		k.releaseAbsent()
		k.releaseExpired()
		if k.tab != nil {
			k.tab.warmUp(k.clock.Now())
			k.shrink()
		}
	}
}

// rearmSweep sets the sweep timer when it is not set, and after a
// barrier or a sweep. armSweep scans every absent pod, so it does not run
// for every request: between barriers and sweeps the absent pods only
// change in ways that need no earlier timer. A pod becomes absent "now",
// after every pod already absent; a pod that stops being absent may leave
// the timer early, and an early sweep releases nothing and sets the
// timer again.
func (k *keeper) rearmSweep() {
	p := &k.pipe
	if p.sweepDue || (!p.rearm && k.sweep.c != nil) {
		return
	}
	p.rearm = false
	k.armSweep()
}

// undefer decides, in arrival order, the deferred requests that need no
// longer wait; a request stays deferred behind an earlier one of its
// lane, and all stay while the open batch is full.
func (k *keeper) undefer() {
	p := &k.pipe
	if len(p.deferred) == 0 {
		return
	}
	held := map[podmodel.ID]struct{}{}
	keep := p.deferred[:0]
	for _, r := range p.deferred {
		lane := r.lane()
		_, behind := held[lane]
		if behind || p.open.full() || (r.kind.waitsForWrites() && p.pending[lane] > 0) {
			held[lane] = struct{}{}
			keep = append(keep, r)
			continue
		}
		k.unqueue(lane)
		k.decideNow(r)
	}
	clear(p.deferred[len(keep):])
	p.deferred = keep
}

// unqueue counts one deferred request of lane less.
func (k *keeper) unqueue(lane podmodel.ID) {
	if k.pipe.queued[lane]--; k.pipe.queued[lane] <= 0 {
		delete(k.pipe.queued, lane)
	}
}

// dispatch sends the open batch, with the cursor and the retried deletes,
// to a committer goroutine, and opens the next batch. Without a store
// (memory is the store) the batch is settled at once.
func (k *keeper) dispatch() {
	p := &k.pipe
	b := p.open
	p.open, p.inflight = newBatch(), b
	k.prepare(b)
	ws := b.writes
	if k.db == nil {
		k.finish(k.storeAll(ws))
		return
	}
	go func() { p.results <- k.storeAll(ws) }()
}

// finish runs the callbacks of the batch whose commit returned, and frees
// the lanes of its requests.
func (k *keeper) finish(res stored) {
	p := &k.pipe
	b := p.inflight
	p.inflight = nil
	k.settle(b.writes, res)
	k.releaseLanes(b.lanes)
}

// releaseLanes frees one pending write of each lane.
func (k *keeper) releaseLanes(lanes []podmodel.ID) {
	for _, lane := range lanes {
		if k.pipe.pending[lane]--; k.pipe.pending[lane] <= 0 {
			delete(k.pipe.pending, lane)
		}
	}
}

// shutdown ends the pipeline when close has begun: the commit in flight
// finishes and its callbacks run; the writes of the open batch fail (their
// decisions are undone) with errClosed, and so do the deferred requests,
// a waiting barrier and the requests still queued. No caller is left
// waiting.
func (k *keeper) shutdown() {
	p := &k.pipe
	if p.inflight != nil {
		k.finish(<-p.results)
	}
	for _, w := range p.open.writes {
		w.done(failed, errClosed)
	}
	k.releaseLanes(p.open.lanes)
	p.open = newBatch()
	for _, r := range p.deferred {
		r.answer(reply{err: errClosed})
	}
	p.deferred, p.queued = nil, map[podmodel.ID]int{}
	if p.barrier != nil {
		p.barrier.answer(reply{err: errClosed})
		p.barrier = nil
	}
	k.failQueued()
	p.publishWaiting()
}
