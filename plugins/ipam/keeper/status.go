package keeper

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// StatusRows bounds the reservations and cooldowns a Status lists.
const StatusRows = 50

// Status is a snapshot of the pools for the status page, read on the
// keeper's goroutine without waiting for the writes in flight (a page
// must not wait for a stalled disk).
type Status struct {
	Started  bool // false: the keeper did not answer (not started, closed)
	Pools    []PoolStats
	External bool
	// Reservations are the allocations awaiting their confirmation,
	// soonest deadline first, at most StatusRows of them; Reserved counts
	// them all.
	Reservations []Reserved
	ReservedN    int
	// Cooling are the released addresses in their cooldown, soonest
	// free first, at most StatusRows; CoolingN counts them all.
	Cooling  []Cooling
	CoolingN int
	// CooldownReused counts the addresses handed out before their
	// cooldown ended since the last resync.
	CooldownReused uint64
}

// Reserved is one reservation of a Status.
type Reserved struct {
	Key      string // the allocation (attachment, pod or owner)
	Pod      string // namespace/name
	Addrs    []netip.Addr
	Deadline time.Time
}

// Cooling is one cooling address of a Status.
type Cooling struct {
	Addr  netip.Addr
	Until time.Time
}

// Status takes the snapshot.
func (k *Keeper) Status() Status {
	var s Status
	k.Do(&Request{Kind: reqInspect, read: func(t *table) {
		s.Started = true
		s.Pools, s.External = t.stats(), t.externalMode()
		s.ReservedN, s.CoolingN, s.CooldownReused = len(t.resv), len(t.cool.until), t.cool.reused
		for key, rv := range t.resv {
			as, _ := t.lookupAll(key)
			s.Reservations = append(s.Reservations, Reserved{Key: key.String(), Pod: t.podOf(key).String(),
				Addrs: as.List(), Deadline: rv.deadline})
		}
		for a, until := range t.cool.until {
			s.Cooling = append(s.Cooling, Cooling{Addr: a, Until: until})
		}
	}})
	slices.SortFunc(s.Reservations, func(a, b Reserved) int {
		return cmp.Or(a.Deadline.Compare(b.Deadline), cmp.Compare(a.Key, b.Key))
	})
	slices.SortFunc(s.Cooling, func(a, b Cooling) int {
		return cmp.Or(a.Until.Compare(b.Until), a.Addr.Compare(b.Addr))
	})
	s.Reservations = s.Reservations[:min(len(s.Reservations), StatusRows)]
	s.Cooling = s.Cooling[:min(len(s.Cooling), StatusRows)]
	return s
}
