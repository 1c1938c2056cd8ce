package keeper

import "time"

// Activity hears each allocation and each release as it becomes durable
// (the status page's series of the last hour). Its methods run on the
// keeper's goroutine, at the keeper's clock: they must be quick and must
// not call the keeper.
type Activity interface {
	// Allocated: a new allocation's record is durable (a repeated ADD of
	// a held attachment is not new).
	Allocated(at time.Time)
	// Released: an allocation's delete is durable, whatever the reason.
	Released(at time.Time)
}

// SetActivity makes a hear the allocations and releases; call it before
// Start.
func (k *Keeper) SetActivity(a Activity) { k.activity = a }

func (k *Keeper) noteAllocated() {
	if a := k.activity; a != nil {
		a.Allocated(k.clock.Now())
	}
}

func (k *Keeper) noteReleased() {
	if a := k.activity; a != nil {
		a.Released(k.clock.Now())
	}
}
