package dbwatcher

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
)

// Watcher turns the Kubernetes state in etcd into events for the
// controller's loop and mirrors it into the local store. Its exported
// methods are safe for concurrent use.
type Watcher struct {
	cfg    Config
	remote kvdb.Broker // cfg.Remote under codec.KSRPrefix
	mirror kvdb.Broker // cfg.Local under cfg.MirrorPrefix; nil without Local

	// resyncReq holds at most one pending remote resync request, so that
	// requests made while one is pending coalesce.
	resyncReq chan struct{}
	// connected is set by the first OnConnect callback: remote resyncs wait
	// for it.
	connected atomic.Bool
	stats     counters

	mu      sync.Mutex // guards started, stopped and cancel
	started bool
	stopped bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New checks cfg, fills its defaults and returns a watcher that does
// nothing until Start. An error names every missing field.
func New(cfg Config) (*Watcher, error) {
	cfg.normalize()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Watcher{
		cfg:       cfg,
		remote:    cfg.Remote.NewBroker(codec.KSRPrefix),
		resyncReq: make(chan struct{}, 1),
	}
	if cfg.Local != nil {
		w.mirror = cfg.Local.NewBroker(cfg.MirrorPrefix)
	}
	return w, nil
}

// String names the watcher in logs.
func (w *Watcher) String() string {
	return fmt.Sprintf("dbwatcher(%s%s)", w.cfg.Remote, codec.KSRPrefix)
}

// Start starts the run goroutine and registers the connection callbacks
// with Remote; it returns at once. A second Start, or a Start after Stop,
// does nothing.
func (w *Watcher) Start() {
	w.mu.Lock()
	if w.started || w.stopped {
		w.mu.Unlock()
		return
	}
	w.started = true
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Go(func() { newSyncer(w).run(ctx) })
	w.mu.Unlock()

	w.cfg.Log.Info("DB watcher started", "remote", w.cfg.Remote.String(), "prefix", codec.KSRPrefix,
		"mirror", w.mirror != nil, "delay-local-resync", w.cfg.DelayLocalResync,
		"retry-interval", w.cfg.RetryInterval)
	// Registered outside the lock: OnConnect may run the callback at once.
	w.cfg.Remote.OnConnect(func() error {
		if !w.isStopped() {
			w.connected.Store(true)
			w.RequestResync()
		}
		return nil
	})
	w.cfg.Remote.OnReconnect(func() {
		if !w.isStopped() {
			w.cfg.Log.Info("etcd reconnected: remote resync requested")
			w.RequestResync()
		}
	})
	if n, ok := w.cfg.Remote.(kvdb.ReplaceNotifier); ok {
		n.OnStoreReplaced(w.storeReplaced)
	}
}

// storeReplaced is the OnStoreReplaced callback: the revisions the watch
// continues from belong to the old store, so the state is listed again
// at once (the store has ended the watch too).
func (w *Watcher) storeReplaced(r kvdb.StoreReplaced) {
	if w.isStopped() {
		return
	}
	w.stats.storeReplacements.Add(1)
	w.cfg.Log.Warn("etcd store replaced: remote resync requested", "reason", r.Reason,
		"old-id", r.OldID, "id", r.NewID, "last-revision", r.LastRevision, "revision", r.Revision)
	w.RequestResync()
}

// RequestResync asks for a remote resync: a fresh List of etcd pushed as a
// DBResync, then a new watch. It never blocks; requests made while one is
// pending are merged. Before etcd's first connection the request waits for
// it.
func (w *Watcher) RequestResync() {
	select {
	case w.resyncReq <- struct{}{}:
	default:
	}
}

// Stop ends the run goroutine and every watch it holds and waits for
// them. It is safe to call twice, concurrently and before Start. The
// callbacks registered with Remote cannot be removed: after Stop they do
// nothing.
func (w *Watcher) Stop() {
	w.mu.Lock()
	w.stopped = true
	cancel := w.cancel
	w.cancel = nil
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	w.wg.Wait()
}

func (w *Watcher) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// Stats returns the counters.
func (w *Watcher) Stats() Stats { return w.stats.snapshot() }
