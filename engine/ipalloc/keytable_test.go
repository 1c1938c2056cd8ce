package ipalloc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkTable checks the invariants of t against want, the keys it must
// hold and their offsets: every key is found with its offset, every
// occupied slot names a live entry whose tag it carries, every slot from
// the home of a key to its slot is occupied (linear probing finds it), the
// load is at most 3/4, and the free ids are exactly the unused entries.
func checkTable(t *keyTable[int], want map[int]uint64) error {
	var err error
	if t.n != len(want) {
		err = errors.Join(err, fmt.Errorf("n = %d, want %d", t.n, len(want)))
	}
	if len(t.slots) > 0 && (len(t.slots)&(len(t.slots)-1) != 0 || len(t.slots) < minSlots) {
		err = errors.Join(err, fmt.Errorf("%d slots: not a power of two of at least %d", len(t.slots), minSlots))
	}
	if t.n*4 > len(t.slots)*3 {
		err = errors.Join(err, fmt.Errorf("%d keys in %d slots: load above 3/4", t.n, len(t.slots)))
	}
	for key, off := range want {
		id, tag, slot := t.find(&key)
		if id == 0 {
			err = errors.Join(err, fmt.Errorf("key %d not found", key))
			continue
		}
		if got := t.ents[id].off; got != off {
			err = errors.Join(err, fmt.Errorf("key %d holds %d, want %d", key, got, off))
		}
		if tag != t.tag(&key) || uint32(t.slots[slot]) != id {
			err = errors.Join(err, fmt.Errorf("key %d: find returned tag %#x slot %d, which holds %#x", key, tag, slot, t.slots[slot]))
		}
	}
	mask := uint64(len(t.slots) - 1)
	live := map[uint32]bool{}
	for i, s := range t.slots {
		if s == 0 {
			continue
		}
		id := uint32(s)
		if id == 0 || int(id) >= len(t.ents) || live[id] {
			err = errors.Join(err, fmt.Errorf("slot %d: id %d out of range or twice", i, id))
			continue
		}
		live[id] = true
		key := t.ents[id].key
		if _, ok := want[key]; !ok {
			err = errors.Join(err, fmt.Errorf("slot %d: key %d should be gone", i, key))
		}
		if tag := t.tag(&key); uint32(s>>32) != tag {
			err = errors.Join(err, fmt.Errorf("slot %d: tag %#x, key %d has %#x", i, s>>32, key, tag))
		}
		for j := uint64(uint32(s>>32)) & mask; j != uint64(i); j = (j + 1) & mask {
			if t.slots[j] == 0 {
				err = errors.Join(err, fmt.Errorf("slot %d: key %d is past the empty slot %d", i, key, j))
				break
			}
		}
	}
	free := map[uint32]bool{}
	for id := t.free; id != 0; id = uint32(t.ents[id].off) {
		if live[id] || free[id] || int(id) >= len(t.ents) {
			return errors.Join(err, fmt.Errorf("free list: id %d is live, repeated or out of range", id))
		}
		free[id] = true
		if t.ents[id].key != 0 {
			err = errors.Join(err, fmt.Errorf("free id %d keeps key %d", id, t.ents[id].key))
		}
	}
	if len(t.ents) > 0 && len(live)+len(free) != len(t.ents)-1 {
		err = errors.Join(err, fmt.Errorf("%d live and %d free ids, %d entries", len(live), len(free), len(t.ents)-1))
	}
	return err
}

// tableOp applies one operation to t and to the map model: add key with
// off when it holds nothing, remove it otherwise.
func tableOp(t *keyTable[int], want map[int]uint64, key int, off uint64) error {
	id, tag, slot := t.find(&key)
	held, ok := want[key]
	switch {
	case (id != 0) != ok:
		return fmt.Errorf("find(%d) = id %d, model holds it: %v", key, id, ok)
	case ok && t.ents[id].off != held:
		return fmt.Errorf("find(%d) holds %d, model %d", key, t.ents[id].off, held)
	case ok:
		t.remove(id, slot)
		delete(want, key)
	default:
		t.add(&key, off, tag, slot)
		want[key] = off
	}
	return nil
}

// TestKeyTableCollisions drives tables whose hash the test hook replaces,
// so that keys share home slots, runs wrap around the end of the slot
// array and removals shift whole runs back, against a map.
func TestKeyTableCollisions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hash func(int) uint64
	}{
		{name: "one home", hash: func(int) uint64 { return 7 }},
		{name: "four homes", hash: func(k int) uint64 { return uint64(k % 4) }},
		{name: "last slots", hash: func(k int) uint64 { return 1<<32 - 1 - uint64(k%3) }}, // home at the end of any array
		{name: "same tag, other hash", hash: func(k int) uint64 { return uint64(k)<<32 | uint64(k) }},
		{name: "spread", hash: func(k int) uint64 { return uint64(k) * 0x9e3779b97f4a7c15 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tab := &keyTable[int]{hash: tc.hash}
			want := map[int]uint64{}
			rng := rand.New(rand.NewPCG(1, 2))
			for step := range 3000 {
				key := rng.IntN(90) + 1 // key 0 is what a free entry holds
				if err := tableOp(tab, want, key, uint64(step)); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if err := checkTable(tab, want); err != nil {
					t.Fatalf("step %d (key %d): %v", step, key, err)
				}
			}
			if tab.n == 0 {
				t.Fatal("the walk left no key: pick another seed")
			}
		})
	}
}

// TestKeyTableGrowShrink fills a table far past its first size and empties
// it: it doubles while it fills and halves while it empties, keeping the
// load between 1/8 and 3/4, and reuses the ids it freed.
func TestKeyTableGrowShrink(t *testing.T) {
	t.Parallel()
	var tab keyTable[int]
	want := map[int]uint64{}
	const n = 5000
	sizes := map[int]bool{}
	for key := 1; key <= n; key++ {
		if err := tableOp(&tab, want, key, uint64(key)); err != nil {
			t.Fatal(err)
		}
		sizes[len(tab.slots)] = true
	}
	if err := checkTable(&tab, want); err != nil {
		t.Fatal(err)
	}
	if len(tab.slots) != 8192 || len(sizes) != 10 { // 16 .. 8192
		t.Fatalf("%d keys: %d slots after %d sizes, want 8192 after 10", n, len(tab.slots), len(sizes))
	}
	for key := 1; key <= n-3; key++ {
		if err := tableOp(&tab, want, key, 0); err != nil {
			t.Fatal(err)
		}
		if tab.n*8 < len(tab.slots) && len(tab.slots) > minSlots {
			t.Fatalf("%d keys in %d slots: not shrunk", tab.n, len(tab.slots))
		}
	}
	if err := checkTable(&tab, want); err != nil {
		t.Fatal(err)
	}
	if len(tab.slots) != minSlots {
		t.Fatalf("3 keys left in %d slots, want %d", len(tab.slots), minSlots)
	}
	entries := len(tab.ents)
	for key := n + 1; key <= 2*n-3; key++ {
		if err := tableOp(&tab, want, key, uint64(key)); err != nil {
			t.Fatal(err)
		}
	}
	if len(tab.ents) != entries {
		t.Fatalf("refilled to %d keys: %d entries, want the %d freed ones reused", tab.n, len(tab.ents), entries)
	}
	if err := checkTable(&tab, want); err != nil {
		t.Fatal(err)
	}
	tab.reset()
	if err := checkTable(&tab, map[int]uint64{}); err != nil {
		t.Fatal(err)
	}
}

// FuzzKeyTable adds and removes keys decoded from data, two bytes an
// operation (a key and its hash), against a map: the hash byte makes
// collisions as likely as the fuzzer wants.
func FuzzKeyTable(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 3, 0, 1, 0, 4, 0, 2, 0})
	f.Add([]byte{1, 15, 2, 15, 3, 14, 4, 0, 1, 15, 3, 14})
	f.Fuzz(func(t *testing.T, data []byte) {
		hashOf := map[int]uint64{}
		tab := &keyTable[int]{hash: func(k int) uint64 { return hashOf[k] }}
		want := map[int]uint64{}
		for i := 0; i+1 < len(data) && i < 2*maxFuzzOps; i += 2 {
			key := int(data[i]) + 1
			if _, ok := hashOf[key]; !ok {
				hashOf[key] = uint64(data[i+1]) // a key keeps its first hash
			}
			if err := tableOp(tab, want, key, uint64(i)); err != nil {
				t.Fatalf("op %d: %v", i/2, err)
			}
			if err := checkTable(tab, want); err != nil {
				t.Fatalf("op %d (key %d): %v", i/2, key, err)
			}
		}
	})
}
