package ipalloc

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
)

// keyModel is the naive reference of Keyed: two maps over the pool model,
// with the documented behaviour of allocations and releases made through
// Pool(): an address allocated there has no owner, an owned address
// released there keeps its owner until a key is recorded on it again or
// its key is unassigned (which releases it from whoever holds it then).
type keyModel struct {
	m     *model
	byKey map[podKey]uint64
	byOff map[uint64]podKey
}

func (km *keyModel) record(key podKey, off uint64) {
	km.byKey[key], km.byOff[off] = off, key
}

func (km *keyModel) assign(key podKey) (uint64, bool, error) {
	if off, ok := km.byKey[key]; ok {
		return off, true, nil
	}
	off, err := km.m.allocate()
	if err == nil {
		km.record(key, off)
	}
	return off, false, err
}

func (km *keyModel) assignAddr(key podKey, off uint64) error {
	if cur, ok := km.byKey[key]; ok {
		if cur == off && off <= km.m.top {
			return nil
		}
		return ErrTaken
	}
	if _, ok := km.byOff[off]; ok {
		return ErrTaken
	}
	err := km.m.allocateAt(off)
	if err == nil {
		km.record(key, off)
	}
	return err
}

func (km *keyModel) unassign(key podKey) (uint64, bool) {
	off, ok := km.byKey[key]
	if ok {
		delete(km.byKey, key)
		delete(km.byOff, off)
		_ = km.m.release(off)
	}
	return off, ok
}

// ranged is what Range must give: the owned offsets that are allocated,
// ascending.
func (km *keyModel) ranged() []uint64 {
	var offs []uint64
	for off := range km.byOff {
		if km.m.taken[off] {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs
}

// keyedHarness runs the same operations on a Keyed pool and the model.
type keyedHarness struct {
	k     *Keyed[podKey]
	km    *keyModel
	keys  []podKey
	steps int
}

func (h *keyedHarness) key(rng *rand.Rand) podKey { return h.keys[rng.IntN(len(h.keys))] }

// offset picks an offset near the window edges, the cursor, an owner block
// or chunk boundary, or anywhere in the window.
func (h *keyedHarness) offset(rng *rand.Rand) uint64 {
	m := h.km.m
	switch rng.IntN(4) {
	case 0:
		return offsetArg(byte(rng.Uint32()), m)
	case 1:
		edge := m.lo + rng.Uint64N((m.hi-m.lo)/blockSize+1)*blockSize
		return edge - 2 + rng.Uint64N(4)
	case 2:
		return m.cursor - 3 + rng.Uint64N(6)
	default:
		return m.lo + rng.Uint64N(m.hi-m.lo+1)
	}
}

func (h *keyedHarness) step(rng *rand.Rand) error {
	h.steps++
	k, km, p := h.k, h.km, h.k.Pool()
	switch r := rng.IntN(100); {
	case r < 35:
		key := h.key(rng)
		a, existed, err := k.Assign(key)
		off, mexisted, merr := km.assign(key)
		if errKind(err) != errKind(merr) || (err == nil && (a != p.AddrAt(off) || existed != mexisted)) {
			return fmt.Errorf("Assign(%v) = %s %v %v, model %d %v %v", key, a, existed, err, off, mexisted, merr)
		}
	case r < 45:
		key, off := h.key(rng), h.offset(rng)
		if err, merr := k.AssignAddr(key, p.AddrAt(off)), km.assignAddr(key, off); errKind(err) != errKind(merr) {
			return fmt.Errorf("AssignAddr(%v, %d) = %v, model %v", key, off, err, merr)
		}
	case r < 75:
		key := h.key(rng)
		a, ok := k.Unassign(key)
		off, mok := km.unassign(key)
		if ok != mok || (ok && a != p.AddrAt(off)) {
			return fmt.Errorf("Unassign(%v) = %s %v, model %d %v", key, a, ok, off, mok)
		}
	case r < 82:
		key := h.key(rng)
		a, ok := k.Lookup(key)
		off, mok := km.byKey[key]
		if ok != mok || (ok && a != p.AddrAt(off)) {
			return fmt.Errorf("Lookup(%v) = %s %v, model %d %v", key, a, ok, off, mok)
		}
	case r < 92:
		off := h.offset(rng)
		owner, ok := k.Owner(p.AddrAt(off))
		mowner, mok := km.byOff[off]
		if ok != mok || owner != mowner {
			return fmt.Errorf("Owner(%d) = %v %v, model %v %v", off, owner, ok, mowner, mok)
		}
	case r < 95: // around the index: an address without owner
		off, err := p.AllocateOffset()
		moff, merr := km.m.allocate()
		if errKind(err) != errKind(merr) || off != moff {
			return fmt.Errorf("Pool().AllocateOffset = %d %v, model %d %v", off, err, moff, merr)
		}
	case r < 98: // around the index: an owned address keeps its owner
		off := h.offset(rng)
		if err, merr := p.ReleaseOffset(off), km.m.release(off); errKind(err) != errKind(merr) {
			return fmt.Errorf("Pool().ReleaseOffset(%d) = %v, model %v", off, err, merr)
		}
	case r < 99:
		off := h.offset(rng)
		if err, merr := p.SetCursor(p.AddrAt(off)), km.m.setCursor(off); errKind(err) != errKind(merr) {
			return fmt.Errorf("SetCursor(%d) = %v, model %v", off, err, merr)
		}
	default:
		if rng.IntN(20) == 0 {
			k.Reset()
			km.m.reset()
			clear(km.byKey)
			clear(km.byOff)
		}
	}
	if k.Len() != len(km.byKey) || p.Used() != uint64(len(km.m.taken)) {
		return fmt.Errorf("Len %d Used %d, model %d %d", k.Len(), p.Used(), len(km.byKey), len(km.m.taken))
	}
	if h.steps%97 == 0 {
		return h.checkRange()
	}
	return nil
}

// checkRange compares all of Range with the model: the same keys and
// addresses, in ascending address order.
func (h *keyedHarness) checkRange() error {
	want := h.km.ranged()
	i := 0
	var err error
	h.k.Range(func(key podKey, a netip.Addr) bool {
		switch {
		case i >= len(want):
			err = fmt.Errorf("Range gives %v %s beyond the %d of the model", key, a, len(want))
		case a != h.k.Pool().AddrAt(want[i]) || key != h.km.byOff[want[i]]:
			err = fmt.Errorf("Range gives %v %s at %d, model %v at %d", key, a, i, h.km.byOff[want[i]], want[i])
		}
		i++
		return err == nil
	})
	if err == nil && i != len(want) {
		err = fmt.Errorf("Range gives %d, model %d", i, len(want))
	}
	return err
}

// TestKeyedMatchesModel runs long random sequences of every Keyed
// operation, and of allocations and releases made around the index through
// Pool(), on dense and sparse pools and on the model.
func TestKeyedMatchesModel(t *testing.T) {
	t.Parallel()
	for i, cfg := range []Config{
		{Prefix: netip.MustParsePrefix("1.2.128.8/29"), ReserveLow: 2, ReserveHigh: 2},
		{Prefix: netip.MustParsePrefix("10.1.0.0/22"), ReserveLow: 2, ReserveHigh: 2,
			Reserved: []netip.Addr{netip.MustParseAddr("10.1.1.0"), netip.MustParseAddr("10.1.0.255")}},
		{Prefix: netip.MustParsePrefix("fd00::/116"), ReserveLow: 255, ReserveHigh: 1},
		{Prefix: netip.MustParsePrefix("fd00::/64"), ReserveLow: 1<<20 + 3},
	} {
		for _, l := range []layout{denseLayout, sparseLayout} {
			if l == denseLayout && cfg.Prefix.Bits() == 64 {
				continue
			}
			t.Run(fmt.Sprintf("%d:%s/layout=%d", i, cfg.Prefix, l), func(t *testing.T) {
				t.Parallel()
				m, ok := newModel(cfg)
				if !ok {
					t.Fatal("model rejects the config")
				}
				p, err := newPool(cfg, l)
				if err != nil {
					t.Fatal(err)
				}
				h := &keyedHarness{k: newKeyed[podKey](p), km: &keyModel{m: m, byKey: map[podKey]uint64{}, byOff: map[uint64]podKey{}}}
				// More keys than most windows hold, so that the table grows,
				// shrinks and runs full.
				for j := range 700 {
					h.keys = append(h.keys, podKey{Namespace: fmt.Sprint("ns", j%7), Name: fmt.Sprint("pod-", j)})
				}
				rng := rand.New(rand.NewPCG(uint64(i), uint64(l)))
				steps := 60000
				if raceEnabled {
					steps = 6000
				}
				for range steps {
					if err := h.step(rng); err != nil {
						t.Fatalf("step %d: %v", h.steps, err)
					}
				}
				if err := h.checkRange(); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d steps, %d keys hold an address at the end", h.steps, len(h.km.byKey))
			})
		}
	}
}

// TestKeyedIndexFollowsUse checks that the owner index holds memory for
// what is owned only: the owner blocks of scattered addresses are dropped
// when their owners go (a few kept for reuse), and the key table shrinks.
func TestKeyedIndexFollowsUse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		prefix string
		l      layout
		stride uint64 // between the addresses assigned
	}{
		{name: "sparse v6 /64", prefix: "fd00::/64", l: auto, stride: 1 << 40},
		{name: "sparse v4 /16", prefix: "10.0.0.0/16", l: sparseLayout, stride: 300},
		{name: "dense v4 /16", prefix: "10.0.0.0/16", l: auto, stride: 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p, err := newPool(Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2}, tc.l)
			g.Expect(err).NotTo(HaveOccurred())
			k := newKeyed[podKey](p)
			empty := k.indexBytes()
			const n = 200
			for i := range uint64(n) {
				g.Expect(k.AssignAddr(podKey{"ns", fmt.Sprint(i)}, p.AddrAt(2+i*tc.stride))).To(Succeed())
			}
			g.Expect(k.owners.blocks()).To(Equal(n), "one owner block per scattered address")
			for i := range uint64(n) {
				_, ok := k.Unassign(podKey{"ns", fmt.Sprint(i)})
				g.Expect(ok).To(BeTrue())
			}
			g.Expect(k.owners.blocks()).To(BeZero(), "the blocks are dropped when they empty")
			g.Expect(len(k.owners.spare)).To(BeNumerically("<=", maxSpare))
			g.Expect(len(k.keys.slots)).To(Equal(minSlots), "the key table shrinks")
			// What is left: the spare blocks, the smallest table and the
			// entry array, which keeps its capacity (at most twice what was
			// held at once).
			held := uint64(k.indexBytes() - empty)
			g.Expect(held).To(BeNumerically("<=", uint64(maxSpare*unsafe.Sizeof(ownerBlock{})+minSlots*8+2*(n+1)*unsafe.Sizeof(keyEntry[podKey]{}))))
			if tc.l == auto && tc.stride > 1<<20 {
				g.Expect(k.owners.sparse).To(BeEmpty())
			}
		})
	}
}

// TestKeyedIndexMemory bounds the memory of the owner index of a full /16
// per key: one entry (the key and its offset), a table slot of 8 bytes at
// a load of at least 3/8, and the 4-byte owner id.
func TestKeyedIndexMemory(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := mustKeyed(t, Config{Prefix: prefix("10.0.0.0/16"), ReserveLow: 2, ReserveHigh: 2})
	for i := range k.Pool().Size() {
		if _, _, err := k.Assign(podKey{"default", fmt.Sprint("pod-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	perKey := float64(k.indexBytes()) / float64(k.Len())
	entry := float64(unsafe.Sizeof(keyEntry[podKey]{}))
	t.Logf("full /16: %.1f bytes per key (entry %v)", perKey, entry)
	// The entry array grows by appending: up to 1.25x its length there.
	g.Expect(perKey).To(BeNumerically("<=", 1.25*entry+8*8/3+4+1))
}

// TestKeyedNoAllocs checks that unassigning a key and assigning a new one
// allocates no memory once the index has its size, also on a sparse pool
// whose next-fit cursor keeps opening owner blocks while others empty.
func TestKeyedNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	for _, tc := range []struct {
		name, prefix string
	}{
		{name: "dense v4 /16", prefix: "10.0.0.0/16"},
		{name: "sparse v6 /64", prefix: "fd00::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			k, err := NewKeyed[benchKey](Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2})
			g.Expect(err).NotTo(HaveOccurred())
			keys := benchKeys(40000)
			const held = 30000
			for _, key := range keys[:held] {
				if _, _, err := k.Assign(key); err != nil {
					t.Fatal(err)
				}
			}
			// The oldest key goes, a new one comes: owner blocks empty
			// behind the cursor as fast as they open ahead of it.
			next := 0
			cycle := func() {
				out, in := keys[next%len(keys)], keys[(next+held)%len(keys)]
				if _, ok := k.Unassign(out); !ok {
					t.Fatalf("%v holds nothing", out)
				}
				if _, _, err := k.Assign(in); err != nil {
					t.Fatal(err)
				}
				next++
			}
			for range 2 * len(keys) { // the maps reach their size
				cycle()
			}
			g.Expect(testing.AllocsPerRun(5000, cycle)).To(BeZero())
			g.Expect(testing.AllocsPerRun(1000, func() {
				_, _ = k.Lookup(keys[next%len(keys)])
				_, _ = k.Owner(k.Pool().Cursor())
			})).To(BeZero())
		})
	}
}
