package ipalloc

import "hash/maphash"

// maxKeys is the most keys a keyTable holds at once: ids are uint32, id 0
// means none, and the slot array stays within 2^32 slots, whose index a
// 32-bit tag covers.
const maxKeys = 1<<31 - 1

// minSlots is the smallest slot array of a table that holds a key.
const minSlots = 16

// keyEntry is one key and the offset it holds. A free entry holds the zero
// key (so that it keeps no memory alive) and, in off, the next free id.
type keyEntry[K comparable] struct {
	key K
	off uint64
}

// keyTable maps keys to the offsets they hold. Each key is stored once, in
// an entry of ents named by its id; slots is an open-addressing index of
// the ids, linear probing, one 8-byte word per slot (a 32-bit tag of the
// key's hash and the id), so a lookup hashes the key once, reads the slots
// from the one its tag points to, and compares only the keys whose tag
// matches. A removal shifts the slots after it back instead of leaving a
// tombstone, so probe sequences stay short under any churn.
//
// Keys go by pointer inside the package: a key is copied once, into its
// entry, and hashed in place.
type keyTable[K comparable] struct {
	seed  maphash.Seed  // made by the first add
	slots []uint64      // tag<<32 | id; 0 is empty; len 0 or a power of two
	ents  []keyEntry[K] // by id; ents[0] is never used
	free  uint32        // the first free id, 0 when none
	n     int           // keys held
	// hash, when not nil, replaces the key's hash: a test hook that
	// forces collisions.
	hash func(K) uint64
}

// tag returns the 32 bits of the hash of *key that the table keeps.
func (t *keyTable[K]) tag(key *K) uint32 {
	var h uint64
	if t.hash != nil {
		h = t.hash(*key)
	} else {
		h = maphash.Comparable(t.seed, *key)
	}
	return uint32(h ^ h>>32)
}

// unhashed is the slot find returns when it did not hash the key: the
// table was empty.
const unhashed = ^uint64(0)

// find returns the id of *key (0 if it holds nothing), its tag and the
// slot where the search ended: the key's, or the empty slot where it
// would go (unhashed when the table is empty).
func (t *keyTable[K]) find(key *K) (id, tag uint32, slot uint64) {
	if t.n == 0 {
		return 0, 0, unhashed
	}
	tag = t.tag(key)
	slots, ents := t.slots, t.ents
	mask := uint64(len(slots) - 1)
	for i := uint64(tag) & mask; ; i = (i + 1) & mask {
		s := slots[i]
		if s == 0 {
			return 0, tag, i
		}
		if uint32(s>>32) == tag && ents[uint32(s)].key == *key {
			return uint32(s), tag, i
		}
	}
}

// full reports whether no other key fits.
func (t *keyTable[K]) full() bool { return t.n >= maxKeys }

// add stores *key, which holds nothing, with off and returns its id. tag
// and slot are what find(key) returned, with no change to the table since;
// the caller checked full.
func (t *keyTable[K]) add(key *K, off uint64, tag uint32, slot uint64) uint32 {
	if slot == unhashed {
		if t.seed == (maphash.Seed{}) {
			t.seed = maphash.MakeSeed()
		}
		tag = t.tag(key)
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(minSlots, 2*len(t.slots)))
		slot = t.emptySlot(tag)
	} else if slot == unhashed {
		slot = t.emptySlot(tag)
	}
	id := t.free
	if id != 0 {
		t.free = uint32(t.ents[id].off)
	} else {
		if len(t.ents) == 0 {
			t.ents = append(t.ents, keyEntry[K]{})
		}
		id = uint32(len(t.ents))
		t.ents = append(t.ents, keyEntry[K]{})
	}
	e := &t.ents[id]
	e.key, e.off = *key, off
	t.slots[slot] = uint64(tag)<<32 | uint64(id)
	t.n++
	return id
}

// emptySlot returns the first empty slot from the home slot of tag.
func (t *keyTable[K]) emptySlot(tag uint32) uint64 {
	mask := uint64(len(t.slots) - 1)
	i := uint64(tag) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

// remove drops the key of id, found at slot.
func (t *keyTable[K]) remove(id uint32, slot uint64) {
	t.unslot(slot)
	t.ents[id] = keyEntry[K]{off: uint64(t.free)}
	t.free = id
	t.n--
	if t.n*8 < len(t.slots) && len(t.slots) > minSlots {
		t.resize(len(t.slots) / 2)
	}
}

// unslot empties slot i and moves back the slots after it that may take
// its place: a slot whose home lies cyclically in (i, j] must stay.
func (t *keyTable[K]) unslot(i uint64) {
	slots := t.slots
	mask := uint64(len(slots) - 1)
	for j := i; ; {
		slots[i] = 0
		for {
			j = (j + 1) & mask
			s := slots[j]
			if s == 0 {
				return
			}
			home := uint64(uint32(s>>32)) & mask
			if (j-home)&mask >= (j-i)&mask {
				slots[i] = s
				i = j
				break
			}
		}
	}
}

// resize moves the slots into an array of n slots (a power of two that
// keeps the load at most 3/4). The tags are the keys' hash bits, so no key
// is hashed again.
func (t *keyTable[K]) resize(n int) {
	old := t.slots
	t.slots = make([]uint64, n)
	mask := uint64(n - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := uint64(uint32(s>>32)) & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// reset drops every key. It keeps the entry array's capacity.
func (t *keyTable[K]) reset() {
	clear(t.ents)
	t.ents = t.ents[:0]
	t.slots = nil
	t.free = 0
	t.n = 0
}
