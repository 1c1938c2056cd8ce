package ipam

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// keeper is the single writer of the pod addresses (see doc.go, "One
// writer"). Every change (allocate, release, resync, the release of
// absent pods) is a request that its run goroutine decides in arrival
// order; the goroutine alone touches the fields marked "owned by run".
type keeper struct {
	db      kvdb.Broker // nil: memory is the store
	cfg     Config
	log     *slog.Logger
	clock   clock
	metrics *ipamMetrics

	reqs    chan *request
	stop    chan struct{}
	stopped chan struct{}
	running atomic.Bool

	// Owned by run.
	tab    *table                    // nil before the first resync
	view   kubeView                  // the pods of the Kubernetes state
	absent map[podmodel.ID]time.Time // held pods the live view lacks, since
	// young holds when pods got their address, for the allocations made
	// within the last grace period (see planAbsent).
	young map[podmodel.ID]time.Time
	retry map[string]struct{} // stale records whose delete failed
	sweep sweepTimer
}

// kubeView is what the keeper knows of the Kubernetes pods.
type kubeView struct {
	// live: the state came from etcd (a remote DB resync and the watch
	// after it), not from the local mirror.
	live bool
	pods map[podmodel.ID]struct{}
}

// reqKind is what a request asks.
type reqKind int

const (
	reqAllocate reqKind = iota
	reqRelease
	reqPodGone // the pod was deleted from Kubernetes
	reqPodSeen // the pod is in Kubernetes
	reqResync
	reqRead
)

// request is one call to the keeper; reply is buffered so that run never
// blocks on a caller.
type request struct {
	kind  reqKind
	pod   podmodel.ID
	data  string // ipamData with an external IPAM
	rs    *resyncInput
	read  func(t *table)
	reply chan reply

	// key is the attachment of an allocation or a release (AddPod,
	// DeletePod); zero for the pod-ID API and Kubernetes pod events.
	key podmanager.AttachmentKey
	gc  *gcInput // reqGC: the network and its valid attachments
}

// reply answers a request.
type reply struct {
	addr netip.Addr
	held bool // release: the pod held an address
	err  error
}

func (r *request) answer(rep reply) { r.reply <- rep }

// errClosed answers the requests of a stopped keeper.
var errClosed = errors.New("IPAM is closed")

// errNotStarted answers the requests made before AfterInit.
var errNotStarted = errors.New("IPAM is not started (AfterInit not called)")

// queueLen bounds the requests waiting for the keeper; callers beyond it
// wait to enqueue (back-pressure).
const queueLen = 1024

// maxServe bounds the requests served in a row before the run loop looks
// at its timers and stop channel again.
const maxServe = 4 * maxBatch

func newKeeper(db kvdb.Broker, cfg Config, log *slog.Logger, clk clock, m *ipamMetrics) *keeper {
	return &keeper{
		db: db, cfg: cfg, log: log, clock: clk, metrics: m,
		reqs:    make(chan *request, queueLen),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		absent:  map[podmodel.ID]time.Time{},
		young:   map[podmodel.ID]time.Time{},
		retry:   map[string]struct{}{},
		sweep:   sweepTimer{clock: clk},
	}
}

// start runs the keeper's goroutine.
func (k *keeper) start() {
	if k.running.Swap(true) {
		return
	}
	go k.run()
}

// close stops the goroutine after the request it is serving and waits for
// it; requests still queued fail with errClosed. It is idempotent.
func (k *keeper) close() {
	if !k.running.Load() {
		return
	}
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	<-k.stopped
}

// do sends r to the keeper and waits for the answer.
func (k *keeper) do(r *request) reply {
	if !k.running.Load() {
		return reply{err: errNotStarted}
	}
	r.reply = make(chan reply, 1)
	select {
	case k.reqs <- r:
	case <-k.stopped:
		return reply{err: errClosed}
	}
	select {
	case rep := <-r.reply:
		return rep
	case <-k.stopped:
		select {
		case rep := <-r.reply:
			return rep
		default:
			return reply{err: errClosed}
		}
	}
}

// read runs fn on the table in the keeper's goroutine, after the writes
// decided before it are durable; fn is not called before the first resync.
func (k *keeper) read(fn func(t *table)) {
	k.do(&request{kind: reqRead, read: fn})
}

func (k *keeper) run() {
	defer close(k.stopped)
	defer k.sweep.stopTimer()
	for {
		if k.stopping() {
			k.failQueued()
			return
		}
		select {
		case r := <-k.reqs:
			k.serve(r)
		case <-k.sweep.c:
			k.sweep.fired()
			k.releaseAbsent()
		case <-k.stop:
			k.failQueued()
			return
		}
		k.armSweep()
	}
}

// failQueued answers every queued request with errClosed.
func (k *keeper) failQueued() {
	for {
		select {
		case r := <-k.reqs:
			r.answer(reply{err: errClosed})
		default:
			return
		}
	}
}

// serve decides r and whatever is queued behind it, in order. Allocations
// and releases of different pods join one batch, stored with one write
// (one fsync); a request for a pod already in the batch, a resync and a
// read first wait for the batch to be durable.
func (k *keeper) serve(r *request) {
	b := newBatch()
	for n := 0; r != nil; n++ {
		switch r.kind {
		case reqResync, reqRead:
			k.flush(b)
			b = newBatch()
			k.runNow(r)
		case reqPodSeen:
			k.seen(r.pod)
			r.answer(reply{})
		default:
			if b.has(podKey(r.pod)) || b.full() {
				k.flush(b)
				b = newBatch()
			}
			k.decide(r, b)
		}
		r = nil
		if n < maxServe && !k.stopping() {
			r = k.next()
		}
	}
	k.flush(b)
}

// stopping tells whether close has begun.
func (k *keeper) stopping() bool {
	select {
	case <-k.stop:
		return true
	default:
		return false
	}
}

// next takes a queued request without waiting.
func (k *keeper) next() *request {
	select {
	case r := <-k.reqs:
		return r
	default:
		return nil
	}
}

// runNow serves a resync or a read.
func (k *keeper) runNow(r *request) {
	if r.kind == reqRead {
		if k.tab != nil {
			r.read(k.tab)
		}
		r.answer(reply{})
		return
	}
	r.answer(reply{err: k.resync(r.rs)})
}

// decide takes the in-memory decision of an allocation or a release and
// adds its write to b; the caller is answered once the write's outcome is
// known (or at once when nothing needs to be written).
func (k *keeper) decide(r *request, b *batch) {
	if r.kind == reqPodGone {
		k.gone(r.pod)
	}
	switch {
	case k.tab == nil && r.kind == reqAllocate:
		r.answer(reply{err: errNotReady})
	case k.tab == nil:
		r.answer(reply{})
	case r.kind == reqAllocate:
		k.allocate(r, b)
	default:
		k.release(r, b)
	}
}

// ctx bounds one store operation.
func (k *keeper) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), k.cfg.StoreTimeout)
}
