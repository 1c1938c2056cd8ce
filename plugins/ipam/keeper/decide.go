package keeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// keyOf is the allocation a request names: its attachment, or with none
// the pod (the pod-ID API).
func keyOf(r *Request) allocKey {
	if r.Key == (podmanager.AttachmentKey{}) {
		return podKeyOf(r.Pod)
	}
	return attKeyOf(r.Key)
}

// allocate decides the address of the request's allocation and adds its
// record to b (with the delete of an adopted pod-keyed record, and the
// release of the pod's obsolete attachments). The caller is answered once
// the record is durable; if it is not, the decision is undone, or, when
// the outcome is unknown, the address stays reserved (see table.unsure).
func (k *Keeper) allocate(r *Request, b *batch) {
	t := k.tab
	key := keyOf(r)
	if key.podKeyed() {
		if held, _, ok := t.podAddr(r.Pod); ok {
			key = held // the pod-ID API answers the address the pod has
		}
	}
	pod := r.Pod
	if _, ok := t.lookupAll(key); ok {
		pod = t.podOf(key)
	}
	d, err := t.decide(key, pod, r.Data)
	if err != nil {
		k.metrics.failed.Inc()
		r.answer(Reply{Err: k.growing(fmt.Errorf("%s: %w", describe(key, r.Pod), err))})
		return
	}
	if d.fresh {
		t.born[key] = k.clock.Now()
	}
	if (d.fresh || d.adopted != nil) && r.UID != "" && !key.podKeyed() {
		t.uids[key] = r.UID
	}
	rv := k.reserve(key, r.Timeout, &d)
	if !d.store {
		k.acknowledged(pod) // again
		r.answer(t.replyOf(d.addrs, ""))
		return
	}
	b.cursor = b.cursor || !t.externalMode()
	b.add(write{op: kvdb.PutOp(key.storeKey(), t.recordOf(key, pod, d.addrs, rv)), done: k.allocated(r, key, pod, d)})
	if d.adopted != nil {
		b.add(write{op: kvdb.DeleteOp(d.adopted.storeKey()), done: k.adoptedDone(*d.adopted)})
	}
	for _, old := range k.obsolete(key, pod) {
		k.addRelease(b, old, k.releaseDone(old, ReleaseObsolete, "released as obsolete", nil))
	}
	r.decided(t.replyOf(d.addrs, rv.idOf()))
}

// allocated completes the store of an allocation's record.
func (k *Keeper) allocated(r *Request, key allocKey, pod podmodel.ID, d decision) func(outcome, error) {
	t := k.tab
	return func(o outcome, err error) {
		switch o {
		case durable:
			delete(t.unsure, key)
			k.acknowledged(pod)
			k.noteHeld(pod)
			if d.fresh {
				k.noteAllocated()
			}
			r.answer(t.replyOf(d.addrs, t.resvID(key)))
		case failed:
			d.undo()
			k.metrics.failed.Inc()
			r.answer(Reply{Err: fmt.Errorf("%s: address %s not stored, allocation undone: %w", describe(key, pod), d.addrs, err)})
		default:
			t.unsure[key] = struct{}{}
			k.noteHeld(pod)
			k.metrics.failed.Inc()
			r.answer(Reply{Err: fmt.Errorf("%s: address %s: %w: %w", describe(key, pod), d.addrs, ErrUnknownOutcome, err)})
		}
	}
}

// adoptedDone completes the delete of an adopted pod-keyed record. It runs
// after the done of the new record (same batch, later write): when the
// store of the new record failed, the table holds old again, as durable
// (the undo does not know whether it was unsure). Only a delete that
// failed leaves its record in the store: after a durable delete the
// record is gone, and after a delete of unknown outcome it may be gone
// (or may never have been stored, when old was unsure already).
func (k *Keeper) adoptedDone(old allocKey) func(outcome, error) {
	t := k.tab
	return func(o outcome, _ error) {
		_, restored := t.lookup(old)
		switch {
		case o != failed && restored:
			t.unsure[old] = struct{}{} // its record is gone, or may be: store it again at the next allocation
		case o != durable && !restored:
			k.retry[old.storeKey()] = struct{}{} // stale now: delete it with a later batch
		}
	}
}

// obsolete lists the pod's attachments that key replaces: the same
// network and interface with another container ID (Contiv's obsolete pod
// configuration). Plain containers (podmanager.ContainerNamespace) have
// no obsolete attachments: their pod name is the container ID. Nor has a
// pod re-created under the name of another (both UIDs known and
// different): the old pod's sandbox may still run, and its attachment
// goes by its own DEL or as an absent pod.
func (k *Keeper) obsolete(key allocKey, pod podmodel.ID) []allocKey {
	if key.podKeyed() || key.ownerKeyed() || pod.Namespace == podmanager.ContainerNamespace {
		return nil
	}
	var out []allocKey
	for _, other := range k.tab.keysOf(pod) {
		if other.podKeyed() || other.ownerKeyed() || other == key || podmanager.ReusedName(k.tab.uids[other], k.tab.uids[key]) {
			continue
		}
		if other.att.Network == key.att.Network && other.att.IfName == key.att.IfName {
			out = append(out, other)
		}
	}
	return out
}

// ErrUnknownOutcome wraps the error of a write whose outcome could not be
// read back.
var ErrUnknownOutcome = errors.New("the store's outcome is unknown and could not be read back, so the address stays reserved for the pod")

// release serves the requests that free addresses: the release of one
// attachment (DEL: never a pod-keyed allocation), or the release of every
// allocation of a pod (the pod-ID API, a pod deleted from Kubernetes).
// An address is free only once its delete is durable.
func (k *Keeper) release(r *Request, b *batch) {
	var keys []allocKey
	if r.Key != (podmanager.AttachmentKey{}) {
		if _, ok := k.tab.lookup(attKeyOf(r.Key)); ok {
			keys = []allocKey{attKeyOf(r.Key)}
		}
	} else {
		keys = k.tab.keysOf(r.Pod)
	}
	if len(keys) == 0 {
		r.answer(Reply{})
		return
	}
	j := newJoin(r, len(keys))
	for _, key := range keys {
		if key.excluded() {
			j.done(netip.Addr{}, nil)
			continue
		}
		a, _ := k.tab.lookup(key)
		j.lowest(a)
		k.addRelease(b, key, k.releaseDone(key, ReleaseCall, "released", j))
	}
	r.decided(Reply{Addr: j.addr, Held: true})
}

// releaseDone completes the delete of an allocation's record: the address
// is free once the delete is durable; j (nil: nobody waits) hears the
// outcome.
func (k *Keeper) releaseDone(key allocKey, reason, what string, j *join) func(outcome, error) {
	t := k.tab
	as, _ := t.lookupAll(key)
	a := as.First()
	pod := t.podOf(key)
	return func(o outcome, err error) {
		switch o {
		case durable:
			k.released(t, key)
			k.forgetIfFree(pod)
			k.metrics.released.WithLabelValues(reason).Inc()
			if k.log.Enabled(context.Background(), slog.LevelDebug) || what != "released" {
				k.log.Info("pod IP "+what, "pod", pod.String(), "key", key.String(), "ip", as.String())
			}
		case failed:
			err = fmt.Errorf("%s: address %s not released: its record could not be deleted: %w", describe(key, pod), a, err)
		default:
			t.unsure[key] = struct{}{}
			err = fmt.Errorf("%s: address %s not released: %w: %w", describe(key, pod), a, ErrUnknownOutcome, err)
		}
		if o != durable && j == nil {
			k.log.Warn("releasing an address failed; it stays held", "error", err)
		}
		j.done(a, err)
	}
}

// released forgets a released allocation of t; its addresses cool down
// for Config.AddressCooldown (the sweep frees them).
func (k *Keeper) released(t *table, key allocKey) {
	now := k.clock.Now()
	as, _ := t.lookupAll(key)
	t.release(key, now, k.cfg.AddressCooldown)
	k.noteReleased()
	if k.cfg.AddressCooldown > 0 {
		k.expiryNear(now.Add(k.cfg.AddressCooldown))
	}
	if k.emptiedAnAddedBlock(t, as) {
		// The sweep drops or gives it back: that stores the pool list,
		// which only a barrier does.
		k.pipe.sweepDue = true
	}
}

// emptiedAnAddedBlock tells whether releasing as left an added block
// that may go now with nothing assigned: a revoked one (dropped once
// empty), or with elastic pools and no address cooldown one whose block
// cooldown starts now (with an address cooldown it starts when the last
// address warms up, in the sweep that frees it).
func (k *Keeper) emptiedAnAddedBlock(t *table, as Addrs) bool {
	for _, a := range as.List() {
		b, i, ok := t.blockOf(a)
		if !ok || b == t.blocks[i][0] || !b.revoked && !(k.elasticOn() && k.cfg.AddressCooldown <= 0) {
			continue
		}
		if t.blockStats(b).Assigned == 0 {
			return true
		}
	}
	return false
}

// acknowledged notes that an address of pod was acknowledged now: the pod
// is young (see planAbsent), and a grace period it is in starts again. A
// deleted pod whose release failed is absent past due, so that the sweep
// retries it; an address acknowledged since may be a re-created pod's,
// which the next sweep or resync must not release at once.
func (k *Keeper) acknowledged(pod podmodel.ID) {
	now := k.clock.Now()
	k.young[pod] = now
	if a, ok := k.absent[pod]; ok {
		a.since = now
		k.absent[pod] = a
	}
}

// forgetIfFree drops the absence and youth of a pod that holds nothing.
func (k *Keeper) forgetIfFree(pod podmodel.ID) {
	if len(k.tab.byPod[pod]) == 0 {
		delete(k.absent, pod)
		delete(k.young, pod)
	}
}

// join answers a request once all of its writes are done: the lowest
// address released, and the first error.
type join struct {
	r    *Request
	left int
	addr netip.Addr
	err  error
}

func newJoin(r *Request, n int) *join { return &join{r: r, left: n} }

// lowest keeps the lowest of the addresses seen.
func (j *join) lowest(a netip.Addr) {
	if !j.addr.IsValid() || a.Less(j.addr) {
		j.addr = a
	}
}

func (j *join) done(a netip.Addr, err error) {
	if j == nil {
		return
	}
	j.lowest(a)
	if j.err == nil {
		j.err = err
	}
	if j.left--; j.left == 0 {
		j.r.answer(Reply{Addr: j.addr, Held: true, Err: j.err})
	}
}

// neverAbsent tells whether a pod is never reconciled with the
// Kubernetes state: a plain container, or an owner of the Cilium-style
// API.
func neverAbsent(id podmodel.ID) bool {
	return id.Namespace == podmanager.ContainerNamespace || id.Namespace == OwnerNamespace
}

// describe names an allocation and its pod in errors.
func describe(key allocKey, pod podmodel.ID) string {
	if key.podKeyed() {
		return key.String()
	}
	return fmt.Sprintf("%s of pod %s", key, pod)
}

// podKey is the store key of the pod-keyed allocation of a pod.
func podKey(id podmodel.ID) string { return AllocationPrefix + id.Namespace + "/" + id.Name }
