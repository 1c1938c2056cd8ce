package keeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// keeper is the single writer of the pod addresses (see doc.go, "One
// writer"). Every change (allocate, release, resync, the release of
// absent pods) is a request that its run goroutine decides in arrival
// order; the goroutine alone touches the fields marked "owned by run".
type Keeper struct {
	db      kvdb.Broker    // nil: memory is the store
	sub     kvdb.Submitter // db's write queue (or serialSubmitter)
	cfg     Config
	log     *slog.Logger
	clock   Clock
	metrics *Metrics
	// activity hears allocations and releases (SetActivity, before
	// Start; nil: nobody).
	activity Activity

	reqs    chan *Request
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
	tab    *table                  // nil before the first resync
	view   kubeView                // the pods of the Kubernetes state
	absent map[podmodel.ID]absence // held pods the live view misses (evidence.go)
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
	last *ResyncInput
	// el is the state of the elastic pools (elastic.go).
	el elastic
	// mir is what contiv-ksr's mirror marker says (evidence.go).
	mir mirrorView
	// rt is what the container runtime's last list says (runtime.go).
	rt runtimeView
}

// kubeView is what the keeper knows of the Kubernetes pods.
type kubeView struct {
	// live: the state came from etcd (a remote DB resync and the watch
	// after it), not from the local mirror.
	live bool
	// pods are the pods of the state, each with its UID ("" when the
	// state has none).
	pods map[podmodel.ID]string
	// empty: the last resync's state held no pod at all, which is no
	// evidence that a pod is gone; no grace period runs until a pod is
	// seen (a resync with pods, or a pod event).
	empty bool
	// nodeScoped: the last resync's pods were all of the per-node layout
	// (podmodel.NodeKeyPrefix): the state holds this node's pods, not
	// the cluster's.
	nodeScoped bool
}

// ReqKind is what a request asks.
type ReqKind int

const (
	ReqAllocate ReqKind = iota
	ReqRelease
	ReqPodGone // the pod was deleted from Kubernetes
	ReqPodSeen // the pod is in Kubernetes
	ReqResync
	reqRead
	reqInspect // read the table at once, not waiting for the writes in flight
	ReqConfirm // confirm the reservation of an attachment
	ReqMirror  // contiv-ksr's mirror marker (Request.Mirror)
)

// barrier tells whether a request of this kind runs alone: once nothing
// is in flight, the open batch is committed and nothing is deferred; the
// requests queued behind it wait in the channel meanwhile. A kind that
// reads or rebuilds the whole table is a barrier.
func (kind ReqKind) barrier() bool {
	return kind == ReqResync || kind == reqRead
}

// waitsForWrites tells whether a request of this kind waits for the
// pending writes of its pod (see request.lane). A kind that neither
// writes nor reads the pod's address need not (a pod seen in Kubernetes
// only stops its grace period); it still keeps its order behind the
// deferred requests of its pod.
func (kind ReqKind) waitsForWrites() bool {
	return kind != ReqPodSeen && kind != ReqPodGone && kind != ReqMirror
}

// notes tells whether a request of this kind only tells the keeper what
// the Kubernetes state holds: it writes nothing.
func (kind ReqKind) notes() bool {
	return kind == ReqPodSeen || kind == ReqPodGone || kind == ReqMirror
}

// Request is one call to the keeper. dec and reply are buffered so that
// run never blocks on a caller; submit makes them.
type Request struct {
	Kind ReqKind
	Pod  podmodel.ID
	Data string // ipamData with an external IPAM
	// Timeout > 0 makes an allocation an expiring reservation (see
	// reservation.go); resv is the reservation a confirm names.
	Timeout time.Duration
	Resv    string
	Resync  *ResyncInput
	read    func(t *table)
	dec     chan Reply // the in-memory decision
	reply   chan Reply // the durable outcome
	// Ctx is the caller's (nil: none): a request whose Ctx has ended
	// when the keeper comes to it is dropped, never decided, and its
	// writes are withdrawn from the store's queue when it ends before
	// they are committed.
	Ctx context.Context
	// MayRefuse: the caller is told to try again later (ErrTryAgain)
	// rather than wait when the keeper holds as many requests as it may
	// (CNI calls and the pod-ID API; never the event loop's resyncs and
	// pod events).
	MayRefuse bool
	// decSent: the decision was sent (owned by run).
	decSent bool

	// Key is the attachment of an allocation or a release (AddPod,
	// DeletePod); zero for the pod-ID API and Kubernetes pod events.
	Key podmanager.AttachmentKey
	// UID is the pod's UID: of an allocation (K8S_POD_UID of the ADD)
	// or of a pod of the Kubernetes state (ReqPodSeen, ReqPodGone); ""
	// when unknown.
	UID string
	// NodeScoped: the pod of a ReqPodSeen came under the per-node layout
	// (podmodel.NodeKeyPrefix): the state holds this node's pods alone.
	NodeScoped bool
	// Mirror is the marker of a ReqMirror (nil: the marker was deleted).
	Mirror *mirror.Marker
}

// lane is what orders the requests of one pod: a request waits for the
// pending writes of its lane (see pipeline.go). Every write a request
// adds must be for a key that only requests of its lane write.
func (r *Request) lane() podmodel.ID { return r.Pod }

// Reply answers a request.
type Reply struct {
	Addr  netip.Addr // the first of addrs
	Addrs Addrs      // allocate: every address of the allocation
	Resv  string     // allocate: the ID of its reservation, "" when none
	// Nets and gws are the pod subnet and the gateway of each address
	// (internal mode; with an external IPAM the node's pod subnets).
	Nets [2]netip.Prefix
	Gws  [2]netip.Addr
	Held bool // release: the pod held an address
	Err  error
}

// decided sends the in-memory decision of r, once; a request whose
// decision needs a write sends it when it adds the write.
func (r *Request) decided(rep Reply) {
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
func (r *Request) answer(rep Reply) {
	r.reply <- rep
	r.decided(rep)
}

// ErrNotReady answers the requests made before the first resync.
var ErrNotReady = errors.New("IPAM is not initialised yet: no resync processed")

// ErrClosed answers the requests of a stopped keeper.
var ErrClosed = errors.New("IPAM is closed")

// ErrNotStarted answers the requests made before AfterInit.
var ErrNotStarted = errors.New("IPAM is not started (AfterInit not called)")

// maxServe bounds the requests taken in a row before the run loop looks
// at the outcomes of the transactions in flight, its timers and its stop
// channel again.
const maxServe = 512

func New(db kvdb.Broker, cfg Config, log *slog.Logger, clk Clock, m *Metrics) *Keeper {
	var sub kvdb.Submitter
	if db != nil {
		var ok bool
		if sub, ok = db.(kvdb.Submitter); !ok {
			sub = newSerialSubmitter(db)
		}
	}
	return &Keeper{
		db: db, sub: sub, cfg: cfg, log: log, clock: clk, metrics: m,
		reqs:       make(chan *Request, queueLen),
		stop:       make(chan struct{}),
		stopped:    make(chan struct{}),
		absent:     map[podmodel.ID]absence{},
		young:      map[podmodel.ID]time.Time{},
		retry:      map[string]struct{}{},
		coolStored: map[netip.Addr]struct{}{}, coolDeleting: map[netip.Addr]bool{},
		sweep: sweepTimer{clock: clk},
		pipe:  newPipeline(),
		el:    newElastic(),
	}
}

// Start runs the keeper's goroutine.
func (k *Keeper) Start() {
	if k.running.Swap(true) {
		return
	}
	go k.run()
}

// Close stops the goroutine and waits for it: the commit in flight
// finishes and its callers get their outcome; the requests decided into
// the next batch, deferred, or still queued fail with errClosed. It is
// idempotent.
func (k *Keeper) Close() {
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

// Do sends r to the keeper and waits for its durable outcome.
func (k *Keeper) Do(r *Request) Reply {
	_, final := k.Submit(r)
	return final(context.Background())
}

// read runs fn on the table in the keeper's goroutine, after the writes
// decided before it are durable; fn is not called before the first resync.
func (k *Keeper) read(fn func(t *table)) {
	k.Do(&Request{Kind: reqRead, read: fn})
}

// run is the keeper's goroutine: it decides requests one at a time while
// the store commits the transactions of earlier ones (see pipeline.go).
func (k *Keeper) run() {
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
func (k *Keeper) failQueued() {
	for {
		select {
		case r := <-k.reqs:
			r.answer(Reply{Err: ErrClosed})
		default:
			return
		}
	}
}

// stopping tells whether close has begun.
func (k *Keeper) stopping() bool {
	select {
	case <-k.stop:
		return true
	default:
		return false
	}
}

// runNow serves a barrier (see ReqKind.barrier) once the pipeline is
// idle: it may read the table, and store on the keeper's goroutine
// (commit), since nothing else is in flight.
func (k *Keeper) runNow(r *Request) {
	switch r.Kind {
	case reqRead:
		if k.tab != nil {
			r.read(k.tab)
		}
		r.answer(Reply{})
	case ReqResync:
		err := k.resync(r.Resync)
		k.noteEvidence()
		r.answer(Reply{Err: err})
	default:
		r.answer(Reply{Err: fmt.Errorf("request kind %d is marked a barrier but has no barrier handler", r.Kind)})
	}
}

// decide takes the in-memory decision of an allocation or a release and
// adds its write to b; the caller is answered once the write's outcome is
// known (or at once when nothing needs to be written).
func (k *Keeper) decide(r *Request, b *batch) {
	switch {
	case k.tab == nil && (r.Kind == ReqAllocate || r.Kind == ReqConfirm):
		r.answer(Reply{Err: ErrNotReady})
	case k.tab == nil:
		r.answer(Reply{})
	case r.Kind == ReqAllocate:
		k.allocate(r, b)
		for i := range k.tab.slots() {
			k.checkWarm(i)
		}
	case r.Kind == ReqConfirm:
		k.confirm(r, b)
	default:
		k.release(r, b)
	}
}

// ctx bounds one store operation.
func (k *Keeper) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), k.cfg.StoreTimeout)
}
