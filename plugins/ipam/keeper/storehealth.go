package keeper

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// storeHealth is whether the store takes the keeper's writes: failing
// from a transaction that the store did not apply (a full disk, a commit
// slower than storeTimeout, a failed store) or could not report, until
// one is durable again. IPAM is not ready while it fails. The keeper
// goroutine writes it; any goroutine reads it.
type storeHealth struct {
	mu      sync.Mutex
	failing error
	notify  func(failing error) // called on each change, on the keeper goroutine
}

// get returns why the store's writes fail (nil: they do not).
func (h *storeHealth) get() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failing
}

// set records the latest state; notify hears a change.
func (h *storeHealth) set(failing error) {
	h.mu.Lock()
	was := h.failing
	h.failing = failing
	notify := h.notify
	h.mu.Unlock()
	if (was == nil) != (failing == nil) && notify != nil {
		notify(failing)
	}
}

// noteStore updates the store's health from the outcome of writes the
// store was asked for: one durable write makes it healthy; a write the
// store did not apply, or whose outcome it could not tell, makes it
// failing, unless its caller withdrew it (a context cancelled) or the
// store was only busy.
func (k *Keeper) noteStore(res stored) {
	if k.db == nil {
		return
	}
	var bad error
	for i, o := range res.outs {
		if o == durable {
			k.health.set(nil)
			return
		}
		if err := res.errs[i]; bad == nil && storeFault(err) {
			bad = err
		}
	}
	if bad != nil {
		k.health.set(bad)
	}
}

// storeFault tells whether a write error is the store's: not a withdrawal
// by its caller, not "busy", not a decision that needed no store.
func storeFault(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, kvdb.ErrBusy),
		errors.Is(err, podmanager.ErrTryAgain) && !errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}

// ProbeKey is written every probeInterval while the store's writes fail
// (its value: the time of the probe), so that IPAM sees the store recover
// without waiting for a pod to be added.
const ProbeKey = "/contiv-agent/ipam/probe"

// probeInterval is the period of those writes.
const probeInterval = 2 * time.Second

// probeTimer wakes the keeper every probeInterval while the store's
// writes fail (real time: a fake clock may stand still in tests).
type probeTimer struct {
	t   *time.Ticker
	c   <-chan time.Time
	due bool // a probe is due: written once the pipeline is idle
}

// follow starts the ticker while failing and stops it otherwise.
func (p *probeTimer) follow(failing bool) {
	switch {
	case failing && p.t == nil:
		p.t = time.NewTicker(probeInterval)
		p.c = p.t.C
	case !failing && p.t != nil:
		p.stop()
	}
}

func (p *probeTimer) stop() {
	if p.t != nil {
		p.t.Stop()
	}
	p.t, p.c, p.due = nil, nil, false
}

// runProbe writes ProbeKey (a barrier: nothing is in flight), which
// updates the store's health like any write.
func (k *Keeper) runProbe() {
	k.probe.due = false
	b := newBatch()
	b.add(write{op: kvdb.PutOp(ProbeKey, []byte(k.clock.Now().UTC().Format(time.RFC3339Nano))), done: func(outcome, error) {}})
	k.commit(b.writes)
}

// OnStoreHealth makes fn hear each change of the store's health (nil:
// its writes are durable again), on the keeper's goroutine; call it
// before Start.
func (k *Keeper) OnStoreHealth(fn func(failing error)) { k.health.notify = fn }

// StoreFailing says why the store does not take the keeper's writes (nil
// when it does); any goroutine may call it.
func (k *Keeper) StoreFailing() error { return k.health.get() }
