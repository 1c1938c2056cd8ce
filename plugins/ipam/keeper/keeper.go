package ipam

import (
	"context"
	"errors"
	"fmt"
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
	db      kvdb.Broker    // nil: memory is the store
	sub     kvdb.Submitter // db's write queue (or serialSubmitter)
	cfg     Config
	log     *slog.Logger
	clock   clock
	metrics *ipamMetrics

	reqs    chan *request
	stop    chan struct{}
	stopped chan struct{}
	running atomic.Bool

	// health is what the keeper knows of the store's writes; any
	// goroutine reads it (readiness).
	health storeHealth
	// probe writes ProbeKey while the store's writes fail, so that a
	// store that recovers is seen without traffic (owned by run).
	probe probeTimer

	// Owned by run, but for pipe.results (the store's callbacks send the
	// outcomes of the transactions in flight) and pipe.waiting (atomic).
	pipe   pipeline
	tab    *table                    // nil before the first resync
	view   kubeView                  // the pods of the Kubernetes state
	absent map[podmodel.ID]time.Time // held pods the live view lacks, since
	// young holds when pods got their address, for the allocations made
	// within the last grace period (see planAbsent).
	young map[podmodel.ID]time.Time
	retry map[string]struct{} // stale records whose delete failed
	// coolStored are the addresses with a stored cooling record (see
	// CoolingPrefix), some perhaps no longer cooling.
	coolStored map[netip.Addr]struct{}
	// coolDeleting are the cooling records whose delete is in flight.
	coolDeleting map[netip.Addr]bool
	sweep        sweepTimer
	// last is the input of the last resync (ImportCheckpoint resyncs
	// with its Kubernetes state).
	last *resyncInput
	// el is the state of the elastic pools (elastic.go).
	el elastic
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
	reqConfirm // confirm the reservation of an attachment
)

// barrier tells whether a request of this kind runs alone: once nothing
// is in flight, the open batch is committed and nothing is deferred; the
// requests queued behind it wait in the channel meanwhile. A kind that
// reads or rebuilds the whole table is a barrier.
func (kind reqKind) barrier() bool {
	return kind == reqResync || kind == reqRead
}

// waitsForWrites tells whether a request of this kind waits for the
// pending writes of its pod (see request.lane). A kind that neither
// writes nor reads the pod's address need not (a pod seen in Kubernetes
// only stops its grace period); it still keeps its order behind the
// deferred requests of its pod.
func (kind reqKind) waitsForWrites() bool { return kind != reqPodSeen }

// request is one call to the keeper. dec and reply are buffered so that
// run never blocks on a caller; submit makes them.
type request struct {
	kind reqKind
	pod  podmodel.ID
	data string // ipamData with an external IPAM
	// timeout > 0 makes an allocation an expiring reservation (see
	// reservation.go); resv is the reservation a confirm names.
	timeout time.Duration
	resv    string
	rs      *resyncInput
	read    func(t *table)
	dec     chan reply // the in-memory decision
	reply   chan reply // the durable outcome
	// ctx is the caller's (nil: none): a request whose ctx has ended
	// when the keeper comes to it is dropped, never decided, and its
	// writes are withdrawn from the store's queue when it ends before
	// they are committed.
	ctx context.Context
	// mayRefuse: the caller is told to try again later (ErrTryAgain)
	// rather than wait when the keeper holds as many requests as it may
	// (CNI calls and the pod-ID API; never the event loop's resyncs and
	// pod events).
	mayRefuse bool
	// decSent: the decision was sent (owned by run).
	decSent bool

	// key is the attachment of an allocation or a release (AddPod,
	// DeletePod); zero for the pod-ID API and Kubernetes pod events.
	key podmanager.AttachmentKey
}

// lane is what orders the requests of one pod: a request waits for the
// pending writes of its lane (see pipeline.go). Every write a request
// adds must be for a key that only requests of its lane write.
func (r *request) lane() podmodel.ID { return r.pod }

// reply answers a request.
type reply struct {
	addr  netip.Addr // the first of addrs
	addrs addrs      // allocate: every address of the allocation
	resv  string     // allocate: the ID of its reservation, "" when none
	// nets and gws are the pod subnet and the gateway of each address
	// (internal mode; with an external IPAM the node's pod subnets).
	nets [2]netip.Prefix
	gws  [2]netip.Addr
	held bool // release: the pod held an address
	err  error
}

// decided sends the in-memory decision of r, once; a request whose
// decision needs a write sends it when it adds the write.
func (r *request) decided(rep reply) {
	if r.decSent {
		return
	}
	r.decSent = true
	r.dec <- rep
}

// answer sends the durable outcome of r, and the decision too when it was
// not sent before (a request that needs no write: final == decision). The
// outcome goes first: a caller woken by the decision finds the outcome
// known already, even with a context that has ended (it raced in CI).
func (r *request) answer(rep reply) {
	r.reply <- rep
	r.decided(rep)
}

// errClosed answers the requests of a stopped keeper.
var errClosed = errors.New("IPAM is closed")

// errNotStarted answers the requests made before AfterInit.
var errNotStarted = errors.New("IPAM is not started (AfterInit not called)")

// maxServe bounds the requests taken in a row before the run loop looks
// at the outcomes of the transactions in flight, its timers and its stop
// channel again.
const maxServe = 512

func newKeeper(db kvdb.Broker, cfg Config, log *slog.Logger, clk clock, m *ipamMetrics) *keeper {
	var sub kvdb.Submitter
	if db != nil {
		var ok bool
		if sub, ok = db.(kvdb.Submitter); !ok {
			sub = newSerialSubmitter(db)
		}
	}
	return &keeper{
		db: db, sub: sub, cfg: cfg, log: log, clock: clk, metrics: m,
		reqs:       make(chan *request, queueLen),
		stop:       make(chan struct{}),
		stopped:    make(chan struct{}),
		absent:     map[podmodel.ID]time.Time{},
		young:      map[podmodel.ID]time.Time{},
		retry:      map[string]struct{}{},
		coolStored: map[netip.Addr]struct{}{}, coolDeleting: map[netip.Addr]bool{},
		sweep: sweepTimer{clock: clk},
		pipe:  newPipeline(),
		el:    newElastic(),
	}
}

// start runs the keeper's goroutine.
func (k *keeper) start() {
	if k.running.Swap(true) {
		return
	}
	go k.run()
}

// close stops the goroutine and waits for it: the commit in flight
// finishes and its callers get their outcome; the requests decided into
// the next batch, deferred, or still queued fail with errClosed. It is
// idempotent.
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

// do sends r to the keeper and waits for its durable outcome.
func (k *keeper) do(r *request) reply {
	_, final := k.submit(r)
	return final(context.Background())
}

// read runs fn on the table in the keeper's goroutine, after the writes
// decided before it are durable; fn is not called before the first resync.
func (k *keeper) read(fn func(t *table)) {
	k.do(&request{kind: reqRead, read: fn})
}

// run is the keeper's goroutine: it decides requests one at a time while
// the store commits the transactions of earlier ones (see pipeline.go).
func (k *keeper) run() {
	defer close(k.stopped)
	defer k.sweep.stopTimer()
	defer k.probe.stop()
	for {
		// Before advance: once close has begun, nothing new is decided.
		if k.stopping() {
			k.shutdown()
			return
		}
		k.advance()
		k.rearmSweep()
		k.probe.follow(k.health.get() != nil)
		k.pipe.publishWaiting()
		select {
		case r := <-k.intake():
			k.take(r)
			k.takeQueued()
		case res := <-k.pipe.results:
			k.finish(res)
		case <-k.sweep.c:
			k.sweep.fired()
			k.pipe.sweepDue = true
		case <-k.probe.c:
			k.probe.due = true
		case <-k.stop:
			k.shutdown()
			return
		}
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

// stopping tells whether close has begun.
func (k *keeper) stopping() bool {
	select {
	case <-k.stop:
		return true
	default:
		return false
	}
}

// runNow serves a barrier (see reqKind.barrier) once the pipeline is
// idle: it may read the table, and store on the keeper's goroutine
// (commit), since nothing else is in flight.
func (k *keeper) runNow(r *request) {
	switch r.kind {
	case reqRead:
		if k.tab != nil {
			r.read(k.tab)
		}
		r.answer(reply{})
	case reqResync:
		r.answer(reply{err: k.resync(r.rs)})
	default:
		r.answer(reply{err: fmt.Errorf("request kind %d is marked a barrier but has no barrier handler", r.kind)})
	}
}

// decide takes the in-memory decision of an allocation or a release and
// adds its write to b; the caller is answered once the write's outcome is
// known (or at once when nothing needs to be written).
func (k *keeper) decide(r *request, b *batch) {
	if r.kind == reqPodGone {
		k.gone(r.pod)
	}
	switch {
	case k.tab == nil && (r.kind == reqAllocate || r.kind == reqConfirm):
		r.answer(reply{err: errNotReady})
	case k.tab == nil:
		r.answer(reply{})
	case r.kind == reqAllocate:
		k.allocate(r, b)
		for i := range k.tab.slots() {
			k.checkWarm(i)
		}
	case r.kind == reqConfirm:
		k.confirm(r, b)
	default:
		k.release(r, b)
	}
}

// ctx bounds one store operation.
func (k *keeper) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), k.cfg.StoreTimeout)
}
