package ipalloc

import (
	"fmt"
	"net/netip"
	"unsafe"
)

// Keyed is a Pool with an owner index: each key holds at most one address
// and each address at most one key. Like Pool it is not safe for concurrent
// use. The zero Keyed is an empty pool.
//
// Keys are hashed with hash/maphash.Comparable: a key type with pointers
// other than strings is moved to the heap on every call (strings, integers
// and structs of them are not).
type Keyed[K comparable] struct {
	pool   *Pool
	keys   keyTable[K] // key -> id -> (key, offset)
	owners owners      // window index -> id
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
	_, isSparse := p.bits.(*sparse)
	return &Keyed[K]{pool: p, owners: newOwners(p.hi-p.lo, isSparse)}
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
	if k == nil {
		_, err := k.Pool().AllocateOffset()
		return netip.Addr{}, false, err
	}
	id, tag, slot := k.keys.find(&key)
	if id != 0 {
		return k.pool.AddrAt(k.keys.ents[id].off), true, nil
	}
	if k.keys.full() {
		return netip.Addr{}, false, fmt.Errorf("assign to %v: %d keys hold an address: %w", key, k.keys.n, ErrPoolExhausted)
	}
	off, err := k.pool.AllocateOffset()
	if err != nil {
		return netip.Addr{}, false, err
	}
	k.record(&key, off, tag, slot)
	return k.pool.AddrAt(off), false, nil
}

// AssignAddr restores a known assignment of a to key. Assigning the same
// address to the same key again is a no-op. The error wraps ErrTaken when
// another key holds a or when key already holds another address (neither
// assignment changes), and otherwise whatever Pool.AllocateAddr returns
// (ErrOutOfRange, ErrReserved, or ErrTaken for an address allocated
// directly in the pool).
func (k *Keyed[K]) AssignAddr(key K, a netip.Addr) error {
	if k == nil {
		return k.Pool().AllocateAddr(a)
	}
	off, inPrefix := k.pool.OffsetOf(a)
	id, tag, slot := k.keys.find(&key)
	if id != 0 {
		cur := k.keys.ents[id].off
		if inPrefix && cur == off {
			return nil
		}
		return fmt.Errorf("assign %s to %v: the key already holds %s: %w", a, key, k.pool.AddrAt(cur), ErrTaken)
	}
	if inPrefix {
		if other, ok := k.owner(off); ok {
			return fmt.Errorf("assign %s to %v: held by %v: %w", a, key, other, ErrTaken)
		}
	}
	if k.keys.full() {
		return fmt.Errorf("assign %s to %v: %d keys hold an address: %w", a, key, k.keys.n, ErrPoolExhausted)
	}
	if err := k.pool.AllocateAddr(a); err != nil {
		return fmt.Errorf("assign to %v: %w", key, err)
	}
	k.record(&key, off, tag, slot)
	return nil
}

// Unassign releases the address of key and returns it; false if key holds
// none.
func (k *Keyed[K]) Unassign(key K) (netip.Addr, bool) {
	if k == nil {
		return netip.Addr{}, false
	}
	id, _, slot := k.keys.find(&key)
	if id == 0 {
		return netip.Addr{}, false
	}
	off := k.keys.ents[id].off
	k.keys.remove(id, slot)
	k.owners.clear(off - k.pool.lo)
	// It fails only if the address was released through Pool() already.
	_ = k.pool.ReleaseOffset(off)
	return k.pool.AddrAt(off), true
}

// Lookup returns the address key holds.
func (k *Keyed[K]) Lookup(key K) (netip.Addr, bool) {
	if k == nil {
		return netip.Addr{}, false
	}
	id, _, _ := k.keys.find(&key)
	if id == 0 {
		return netip.Addr{}, false
	}
	return k.pool.AddrAt(k.keys.ents[id].off), true
}

// Owner returns the key that holds a.
func (k *Keyed[K]) Owner(a netip.Addr) (K, bool) {
	off, ok := k.Pool().OffsetOf(a)
	if !ok {
		var zero K
		return zero, false
	}
	return k.owner(off)
}

// Len returns the number of keys that hold an address.
func (k *Keyed[K]) Len() int {
	if k == nil {
		return 0
	}
	return k.keys.n
}

// Range calls fn with every key and its address in ascending address order
// until fn returns false. fn must not modify the pool.
func (k *Keyed[K]) Range(fn func(K, netip.Addr) bool) {
	if fn == nil || k == nil {
		return
	}
	k.pool.rangeOffsets(func(off uint64) bool {
		id := k.owners.get(off - k.pool.lo)
		return id == 0 || fn(k.keys.ents[id].key, k.pool.AddrAt(off))
	})
}

// Reset unassigns every key and resets the pool.
func (k *Keyed[K]) Reset() {
	if k == nil {
		return
	}
	k.keys.reset()
	k.owners.reset()
	k.pool.Reset()
}

// owner returns the key that holds offset off.
func (k *Keyed[K]) owner(off uint64) (K, bool) {
	var zero K
	if k == nil || !k.pool.inWindow(off) {
		return zero, false
	}
	id := k.owners.get(off - k.pool.lo)
	if id == 0 {
		return zero, false
	}
	return k.keys.ents[id].key, true
}

// record makes *key, which holds nothing, the owner of off, which the
// pool just allocated; tag and slot are what find(key) returned.
func (k *Keyed[K]) record(key *K, off uint64, tag uint32, slot uint64) {
	id := k.keys.add(key, off, tag, slot)
	k.owners.set(off-k.pool.lo, id)
}

// indexBytes returns the memory of the owner index (the key table and the
// owner blocks), not counting what the keys point to (string bytes) nor
// the pool's bitmap.
func (k *Keyed[K]) indexBytes() uintptr {
	if k == nil {
		return 0
	}
	n := uintptr(cap(k.keys.slots))*8 + uintptr(cap(k.keys.ents))*unsafe.Sizeof(keyEntry[K]{})
	return n + k.owners.bytes()
}
