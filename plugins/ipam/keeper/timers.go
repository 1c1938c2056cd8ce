package keeper

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// changeTimer stores the allocation holding ip with the reservation next
// picks (nil: none), and keeps it in the table once durable.
func (k *Keeper) changeTimer(a netip.Addr, next func(t *table, key allocKey) (*reservation, error)) error {
	var werr error
	err := k.exec(func(t *table, b *batch) error {
		key, held := t.owner(a)
		if !held || key.excluded() {
			return fmt.Errorf("expiration timer of %s: %w", a, ErrNotAllocated)
		}
		rv, err := next(t, key)
		if err != nil {
			return err
		}
		as, _ := t.lookupAll(key)
		b.add(write{op: kvdb.PutOp(key.storeKey(), t.recordOf(key, t.podOf(key), as, rv)), done: func(o outcome, err error) {
			if o != durable {
				werr = fmt.Errorf("expiration timer of %s: not stored: %w", key, err)
				if o == unknown {
					t.unsure[key] = struct{}{}
				}
				return
			}
			if rv == nil {
				delete(t.resv, key)
				return
			}
			t.resv[key] = *rv
			k.expiryNear(rv.deadline)
		}})
		return nil
	})
	if err != nil {
		return err
	}
	return werr
}

// applyExclusions applies the exclusions of a resync to its new table.
func (k *Keeper) applyExclusions(t *table, in *ResyncInput) {
	for _, e := range in.Exclusions {
		k.applyExclusion(t, e)
	}
}

// applyExclusion applies one exclusion; a bad one is logged.
func (k *Keeper) applyExclusion(t *table, e Exclusion) {
	n, err := t.exclude(e)
	switch {
	case err != nil:
		k.log.Warn("exclusion not applied", "error", err)
	case n > 0:
		k.log.Info("addresses excluded from allocation", "cidr", e.Prefix.String(), "owner", e.Owner, "addresses", n)
	}
}

// StartTimer starts an expiration timer on the allocation that holds a:
// unless StopTimer names the returned ID in time, the allocation (every
// address of it) is released after timeout. An allocation with a timer
// already is ErrTimerExists; an address nobody holds, ErrNotAllocated.
// The deadline is durable when it returns.
func (k *Keeper) StartTimer(a netip.Addr, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		return "", fmt.Errorf("expiration timeout %s: want a positive duration", timeout)
	}
	var id string
	err := k.changeTimer(a, func(t *table, key allocKey) (*reservation, error) {
		if rv, ok := t.resv[key]; ok {
			return nil, fmt.Errorf("%s (expires at %s): %w", key, rv.deadline.UTC().Format(time.RFC3339), ErrTimerExists)
		}
		rv := k.newReservation(timeout)
		id = rv.id
		return rv, nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// StopTimer stops the expiration timer of the allocation that holds a,
// if uuid is its ID (ErrReservationMismatch otherwise): the allocation
// stays until it is released. The change is durable when it returns.
func (k *Keeper) StopTimer(a netip.Addr, uuid string) error {
	return k.changeTimer(a, func(t *table, key allocKey) (*reservation, error) {
		rv, ok := t.resv[key]
		if !ok || rv.id != uuid {
			return nil, fmt.Errorf("stopping timer %s of %s (it has %q): %w", uuid, key, rv.id, ErrReservationMismatch)
		}
		return nil, nil
	})
}

// ApplyExclusions applies exclusions made at run time to the table (they
// are applied again at every resync, from the resync's input). Before
// the first resync it fails with ErrNotReady.
func (k *Keeper) ApplyExclusions(es []Exclusion) error {
	return k.exec(func(t *table, _ *batch) error {
		for _, e := range es {
			k.applyExclusion(t, e)
		}
		return nil
	})
}
