package ipalloc

import (
	"fmt"
	"net/netip"
)

// Keyed is a Pool with an owner index: each key holds at most one address
// and each address at most one key. Like Pool it is not safe for concurrent
// use. The zero Keyed is an empty pool.
type Keyed[K comparable] struct {
	pool  *Pool
	byKey map[K]uint64 // key -> offset
	byOff map[uint64]K // offset -> key
}

// NewKeyed returns an empty keyed pool for cfg (see New).
func NewKeyed[K comparable](cfg Config) (*Keyed[K], error) {
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return newKeyed[K](p), nil
}

func newKeyed[K comparable](p *Pool) *Keyed[K] {
	return &Keyed[K]{pool: p, byKey: make(map[K]uint64), byOff: make(map[uint64]K)}
}

// Pool returns the underlying pool, for queries (Size, Used, Contains,
// Cursor) and SetCursor. Do not allocate or release through it: that
// bypasses the index. An address allocated there has no owner (Range skips
// it, AssignAddr finds it taken); an owned address released there keeps its
// owner, and Unassign later releases it again, from whoever holds it then.
func (k *Keyed[K]) Pool() *Pool {
	if k == nil {
		return nil
	}
	return k.pool
}

// Assign gives key an address: the one it already holds (existed is true),
// or the next one from the pool (the error wraps ErrPoolExhausted when none is
// free).
func (k *Keyed[K]) Assign(key K) (addr netip.Addr, existed bool, err error) {
	if off, ok := k.lookup(key); ok {
		return k.pool.AddrAt(off), true, nil
	}
	off, err := k.Pool().AllocateOffset()
	if err != nil {
		return netip.Addr{}, false, err
	}
	k.record(key, off)
	return k.pool.AddrAt(off), false, nil
}

// AssignAddr restores a known assignment of a to key. Assigning the same
// address to the same key again is a no-op. The error wraps ErrTaken when
// another key holds a or when key already holds another address (neither
// assignment changes), and otherwise whatever Pool.AllocateAddr returns
// (ErrOutOfRange, ErrReserved, or ErrTaken for an address allocated
// directly in the pool).
func (k *Keyed[K]) AssignAddr(key K, a netip.Addr) error {
	off, inPrefix := k.Pool().OffsetOf(a)
	if cur, ok := k.lookup(key); ok {
		if inPrefix && cur == off {
			return nil
		}
		return fmt.Errorf("assign %s to %v: the key already holds %s: %w", a, key, k.pool.AddrAt(cur), ErrTaken)
	}
	if inPrefix {
		if other, ok := k.byOff[off]; ok {
			return fmt.Errorf("assign %s to %v: held by %v: %w", a, key, other, ErrTaken)
		}
	}
	if err := k.Pool().AllocateAddr(a); err != nil {
		return fmt.Errorf("assign to %v: %w", key, err)
	}
	k.record(key, off)
	return nil
}

// Unassign releases the address of key and returns it; false if key holds
// none.
func (k *Keyed[K]) Unassign(key K) (netip.Addr, bool) {
	off, ok := k.lookup(key)
	if !ok {
		return netip.Addr{}, false
	}
	delete(k.byKey, key)
	delete(k.byOff, off)
	// It fails only if the address was released through Pool() already.
	_ = k.pool.ReleaseOffset(off)
	return k.pool.AddrAt(off), true
}

// Lookup returns the address key holds.
func (k *Keyed[K]) Lookup(key K) (netip.Addr, bool) {
	off, ok := k.lookup(key)
	if !ok {
		return netip.Addr{}, false
	}
	return k.pool.AddrAt(off), true
}

// Owner returns the key that holds a.
func (k *Keyed[K]) Owner(a netip.Addr) (K, bool) {
	var zero K
	off, ok := k.Pool().OffsetOf(a)
	if !ok {
		return zero, false
	}
	key, ok := k.byOff[off]
	return key, ok
}

// Len returns the number of keys that hold an address.
func (k *Keyed[K]) Len() int {
	if k == nil {
		return 0
	}
	return len(k.byKey)
}

// Range calls fn with every key and its address in ascending address order
// until fn returns false. fn must not modify the pool.
func (k *Keyed[K]) Range(fn func(K, netip.Addr) bool) {
	if fn == nil {
		return
	}
	k.Pool().rangeOffsets(func(off uint64) bool {
		key, ok := k.byOff[off]
		return !ok || fn(key, k.pool.AddrAt(off))
	})
}

// Reset unassigns every key and resets the pool.
func (k *Keyed[K]) Reset() {
	if k == nil {
		return
	}
	clear(k.byKey)
	clear(k.byOff)
	k.pool.Reset()
}

func (k *Keyed[K]) lookup(key K) (uint64, bool) {
	if k == nil {
		return 0, false
	}
	off, ok := k.byKey[key]
	return off, ok
}

func (k *Keyed[K]) record(key K, off uint64) {
	k.byKey[key] = off
	k.byOff[off] = key
}
