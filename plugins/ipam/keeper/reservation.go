package keeper

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// reservation is an expiring allocation (Cilium's expiration timer): the
// allocation is released at deadline unless its reservation is confirmed
// first (ConfirmAttachment, StopExpirationTimer with the same id). The
// deadline is stored in the allocation's record, so it survives a
// restart; a confirmed allocation's record has none and never expires.
type reservation struct {
	id       string // a random UUID; a confirmation must name it
	deadline time.Time
}

// idOf is the reservation's ID, "" for nil.
func (rv *reservation) idOf() string {
	if rv == nil {
		return ""
	}
	return rv.id
}

// resvID is the ID of k's reservation, "" when none.
func (t *table) resvID(k allocKey) string {
	if rv, ok := t.resv[k]; ok {
		return rv.id
	}
	return ""
}

// ErrReservationMismatch: a confirmation (ConfirmAttachment,
// StopExpirationTimer) names a reservation the allocation does not have:
// it expired, a later ADD replaced it, or none was made.
var ErrReservationMismatch = errors.New("the reservation does not match the allocation's")

// newReservation starts a reservation that ends timeout from now.
func (k *Keeper) newReservation(timeout time.Duration) *reservation {
	return &reservation{id: uuid.NewString(), deadline: k.clock.Now().Add(timeout)}
}

// reserve gives allocation key a reservation when the request asks for
// one (timeout > 0): a new allocation gets one; an allocation still
// reserved gets a new one (a repeated ADD: the earlier caller can no
// longer confirm); a confirmed allocation gets none. d is updated so that
// its record carries the reservation and its undo restores the previous
// one. It returns the allocation's reservation (nil: none).
func (k *Keeper) reserve(key allocKey, timeout time.Duration, d *decision) *reservation {
	t := k.tab
	cur, reserved := t.resv[key]
	if timeout <= 0 || !d.fresh && !reserved {
		if reserved {
			return &cur
		}
		return nil
	}
	rv := k.newReservation(timeout)
	t.resv[key] = *rv
	undo := d.undo
	d.store = true
	d.undo = func() {
		undo()
		if _, held := t.lookupAll(key); held && reserved {
			t.resv[key] = cur
		} else {
			delete(t.resv, key)
		}
	}
	k.expiryNear(rv.deadline)
	return rv
}

// expiryNear makes the sweep timer fire by deadline.
func (k *Keeper) expiryNear(deadline time.Time) {
	if k.sweep.c == nil || deadline.Before(k.sweep.at) {
		k.pipe.rearm = true
	}
}

// earliestDeadline is the first deadline of a reservation, zero when
// there is none.
func (t *table) earliestDeadline() time.Time {
	var first time.Time
	for _, rv := range t.resv {
		if first.IsZero() || rv.deadline.Before(first) {
			first = rv.deadline
		}
	}
	return first
}

// confirmLane is the lane of a confirmation: the pod of the attachment
// (its writes and its DEL are in that lane), or a lane of its own when
// the attachment holds nothing (the confirmation fails without a write).
func (k *Keeper) confirmLane(r *Request) podmodel.ID {
	if k.tab != nil {
		if pod, ok := k.tab.pods[attKeyOf(r.Key)]; ok {
			return pod
		}
	}
	return podmodel.ID{Namespace: excludedNamespace, Name: r.Key.String()}
}

// confirm stores the allocation of r.key without its reservation, if
// r.resv is its reservation.
func (k *Keeper) confirm(r *Request, b *batch) {
	t, key := k.tab, attKeyOf(r.Key)
	rv, ok := t.resv[key]
	as, held := t.lookupAll(key)
	switch {
	case !held:
		r.answer(Reply{Err: fmt.Errorf("confirming reservation %s of %s: the attachment holds no address (its reservation expired, or it was deleted): %w: %w",
			r.Resv, r.Key, ErrReservationMismatch, podmanager.ErrBadRequest)})
		return
	case !ok || rv.id != r.Resv:
		r.answer(Reply{Err: fmt.Errorf("confirming reservation %s of %s (addresses %s): it has reservation %q: %w: %w",
			r.Resv, r.Key, as, rv.id, ErrReservationMismatch, podmanager.ErrBadRequest)})
		return
	}
	pod := t.podOf(key)
	b.add(write{op: kvdb.PutOp(key.storeKey(), t.recordOf(key, pod, as, nil)), done: func(o outcome, err error) {
		switch o {
		case durable:
			if cur, still := t.resv[key]; still && cur.id == rv.id {
				delete(t.resv, key)
			}
			r.answer(Reply{Addr: as.First(), Addrs: as})
		case failed:
			r.answer(Reply{Err: fmt.Errorf("confirming reservation %s of %s: not stored, it still expires at %s: %w", rv.id, r.Key, rv.deadline.UTC().Format(time.RFC3339), err)})
		default:
			t.unsure[key] = struct{}{}
			r.answer(Reply{Err: fmt.Errorf("confirming reservation %s of %s: %w: %w", rv.id, r.Key, ErrUnknownOutcome, err)})
		}
	}})
	r.decided(Reply{Addr: as.First(), Addrs: as})
}

// releaseExpired releases the allocations whose reservation ended
// unconfirmed; each release is logged and counted. It runs in the sweep,
// with nothing in flight.
func (k *Keeper) releaseExpired() {
	if k.tab == nil || len(k.tab.resv) == 0 {
		return
	}
	now := k.clock.Now()
	b := newBatch()
	for _, key := range k.tab.expired(now) {
		if b.full() {
			break // the rest at the next sweep, which is due at once
		}
		done := k.releaseDone(key, reasonExpired, "released: its reservation expired unconfirmed", nil)
		k.addRelease(b, key, func(o outcome, err error) {
			done(o, err)
			if o == durable {
				k.metrics.reclaimed.WithLabelValues(reasonExpired).Inc()
			} else {
				k.sweep.notBefore = k.clock.Now().Add(sweepRetryDelay)
			}
		})
	}
	k.flush(b)
}

// reasonExpired: a reservation ended unconfirmed.
const reasonExpired = "expired"

// expired lists the allocations whose reservation ended by now, in a
// stable order.
func (t *table) expired(now time.Time) []allocKey {
	var out []allocKey
	for key, rv := range t.resv {
		if !now.Before(rv.deadline) {
			out = append(out, key)
		}
	}
	sortKeys(out)
	return out
}
