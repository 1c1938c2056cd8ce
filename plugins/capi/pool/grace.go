package pool

import (
	"container/heap"
	"net/netip"
	"time"
)

// expiries holds the released addresses in their grace period: until maps
// each to the time it becomes free, and a min-heap orders them. An entry
// that Restore took out stays in the heap until its time and is skipped
// then (until no longer names it at that time).
type expiries struct {
	until map[netip.Addr]time.Time
	h     expiryHeap
}

type expiryEntry struct {
	addr netip.Addr
	at   time.Time
}

func newExpiries() expiries {
	return expiries{until: make(map[netip.Addr]time.Time)}
}

// add puts a in its grace period until at.
func (e *expiries) add(a netip.Addr, at time.Time) {
	e.until[a] = at
	heap.Push(&e.h, expiryEntry{a, at})
}

// remove takes a out of its grace period; false if it was not in it.
func (e *expiries) remove(a netip.Addr) bool {
	_, ok := e.until[a]
	delete(e.until, a)
	return ok
}

// popUntil calls free with every address whose time is at or before now,
// and forgets it.
func (e *expiries) popUntil(now time.Time, free func(netip.Addr)) {
	for len(e.h) > 0 && !e.h[0].at.After(now) {
		x := heap.Pop(&e.h).(expiryEntry)
		if at, ok := e.until[x.addr]; ok && at.Equal(x.at) {
			delete(e.until, x.addr)
			free(x.addr)
		}
	}
}

// next returns the earliest time an address becomes free.
func (e *expiries) next() (time.Time, bool) {
	for len(e.h) > 0 {
		x := e.h[0]
		if at, ok := e.until[x.addr]; ok && at.Equal(x.at) {
			return x.at, true
		}
		heap.Pop(&e.h)
	}
	return time.Time{}, false
}

type expiryHeap []expiryEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
