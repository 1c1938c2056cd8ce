package ipalloc

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"testing"
)

// fuzzPrefixes are the pools a fuzz input picks from: tiny, chunk-sized,
// multi-chunk, and IPv6 pools far bigger than the 2^64 cap.
var fuzzPrefixes = []netip.Prefix{
	netip.MustParsePrefix("1.2.128.8/29"),
	netip.MustParsePrefix("10.0.0.0/28"),
	netip.MustParsePrefix("10.1.0.0/24"),
	netip.MustParsePrefix("10.2.0.0/20"),
	netip.MustParsePrefix("10.3.0.0/19"),
	netip.MustParsePrefix("1.2.3.4/32"),
	netip.MustParsePrefix("1.2.3.4/31"),
	netip.MustParsePrefix("0.0.0.0/0"),
	netip.MustParsePrefix("fd00::/120"),
	netip.MustParsePrefix("2001:db8::/116"),
	netip.MustParsePrefix("fd00::/64"),
	netip.MustParsePrefix("fd00:1::/48"),
	netip.MustParsePrefix("::/0"),
	netip.MustParsePrefix("fd00::/128"),
	netip.MustParsePrefix("fd00::/127"),
	netip.MustParsePrefix("fe80::/100"),
}

// maxFuzzOps bounds the operations decoded from one input, and
// maxFuzzSteps the single operations they expand to (opFill), so that one
// input runs in milliseconds.
const (
	maxFuzzOps   = 4096
	maxFuzzSteps = 16384
)

// harnessFrom builds a harness from the first bytes of data: the prefix,
// ReserveLow and ReserveHigh, and up to three reserved addresses. It
// returns the rest of data, and false when data is too short or the config
// is rejected (consistently by New and the model).
func harnessFrom(t *testing.T, data []byte) (*harness, []byte, bool) {
	if len(data) < 3 {
		return nil, nil, false
	}
	cfg := Config{
		Prefix:      fuzzPrefixes[int(data[0])%len(fuzzPrefixes)],
		ReserveLow:  uint64(data[1] & 3),
		ReserveHigh: uint64(data[1] >> 2 & 3),
	}
	if data[1]&0x10 != 0 { // a big ReserveLow: allocations start deep inside
		cfg.ReserveLow = 1<<20 + 3
	}
	m, ok := newModel(cfg)
	data = data[2:]
	if ok {
		n := int(data[0] & 3)
		data = data[1:]
		for ; n > 0 && len(data) > 0; n-- {
			cfg.Reserved = append(cfg.Reserved, refAddr(cfg.Prefix, offsetArg(data[0], m)))
			data = data[1:]
		}
		m, ok = newModel(cfg)
	}
	p, err := New(cfg)
	if ok != (err == nil) {
		t.Fatalf("New(%+v) error %v, model accepts it: %v", cfg, err, ok)
	}
	if !ok {
		return nil, nil, false
	}
	h := &harness{pools: []*Pool{p}, m: m}
	if other := otherLayout(t, cfg, p); other != nil {
		h.pools = append(h.pools, other)
	}
	return h, data, true
}

// otherLayout returns a pool for cfg with the other bitmap than p, when
// that one fits in memory.
func otherLayout(t *testing.T, cfg Config, p *Pool) *Pool {
	l := sparseLayout
	if _, isSparse := p.bits.(*sparse); isSparse {
		if p.hi-p.lo > 1<<16 {
			return nil
		}
		l = denseLayout
	}
	q, err := newPool(cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// offsetArg turns one byte into an offset near the interesting places of
// the model's window: its low end, its high end, the cursor, or spread
// across it.
func offsetArg(b byte, m *model) uint64 {
	v := uint64(b & 63)
	switch b >> 6 {
	case 0:
		return m.lo - 2 + v
	case 1:
		return m.hi + 2 - v
	case 2:
		return m.cursor - 8 + v
	default:
		return m.lo + (m.hi-m.lo)/63*v
	}
}

// opFrom decodes one operation from two bytes.
func opFrom(kind, arg byte, m *model) op {
	o := op{kind: opKind(kind % byte(numOps))}
	switch o.kind {
	case opFill:
		o.off = uint64(arg) + 1
	case opReset:
		if arg&7 != 0 {
			o.kind = opAlloc
		}
	default:
		o.off = offsetArg(arg, m)
	}
	return o
}

// FuzzPool decodes a config and an operation sequence, runs it on the pool
// in both bitmap layouts and on the model, and checks that they agree and
// that Used()+Free()==Size(), no address is handed out twice, and no
// reserved or out-of-window address is handed out.
func FuzzPool(f *testing.F) {
	f.Add([]byte{0, 0x0a, 0, 0, 0, 0, 0, 2, 0xc1, 0, 0, 0, 0, 2, 0xc1, 0, 0, 0, 0})
	f.Add([]byte{4, 0x05, 2, 0x40, 0xc5, 7, 200, 7, 255, 2, 0xd0, 0, 0, 7, 40, 5, 0x81, 0, 0})
	f.Add([]byte{10, 0x0f, 1, 0x41, 0, 0, 3, 0x40, 0, 0, 1, 0x41, 2, 0x41, 7, 10})
	f.Add([]byte{11, 0x1a, 3, 0xc3, 0x40, 0x81, 7, 255, 5, 0x40, 0, 0, 8, 0, 7, 3})
	f.Add([]byte{12, 0x00, 0, 1, 0x7f, 0, 0, 5, 0x7f, 0, 0, 6, 0x7f})
	f.Add([]byte{5, 0x00, 0, 0, 0, 0, 0, 2, 0x3e})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, rest, ok := harnessFrom(t, data)
		if !ok {
			return
		}
		for i := 0; i+1 < len(rest) && i < 2*maxFuzzOps && h.steps < maxFuzzSteps; i += 2 {
			if err := h.step(opFrom(rest[i], rest[i+1], h.m)); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.check(); err != nil {
			t.Fatal(err)
		}
	})
}

// keyedModel is the reference of Keyed: two maps over the pool model.
type keyedModel struct {
	m     *model
	byKey map[uint8]uint64
	byOff map[uint64]uint8
}

func (km *keyedModel) assign(key uint8) (uint64, bool, error) {
	if off, ok := km.byKey[key]; ok {
		return off, true, nil
	}
	off, err := km.m.allocate()
	if err == nil {
		km.byKey[key], km.byOff[off] = off, key
	}
	return off, false, err
}

func (km *keyedModel) assignAddr(key uint8, off uint64) error {
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
		km.byKey[key], km.byOff[off] = off, key
	}
	return err
}

func (km *keyedModel) unassign(key uint8) (uint64, bool) {
	off, ok := km.byKey[key]
	if ok {
		delete(km.byKey, key)
		delete(km.byOff, off)
		if err := km.m.release(off); err != nil {
			panic(err)
		}
	}
	return off, ok
}

// keyedStep runs one decoded operation on k and km.
func keyedStep(k *Keyed[uint8], km *keyedModel, kind, key, arg byte) error {
	p := k.Pool()
	switch kind % 5 {
	case 0:
		a, existed, err := k.Assign(key)
		off, mexisted, merr := km.assign(key)
		if errKind(err) != errKind(merr) || (err == nil && (a != p.AddrAt(off) || existed != mexisted)) {
			return fmt.Errorf("Assign(%d) = %s %v %v, model %d %v %v", key, a, existed, err, off, mexisted, merr)
		}
	case 1:
		off := offsetArg(arg, km.m)
		err, merr := k.AssignAddr(key, p.AddrAt(off)), km.assignAddr(key, off)
		if errKind(err) != errKind(merr) {
			return fmt.Errorf("AssignAddr(%d, %d) = %v, model %v", key, off, err, merr)
		}
	case 2:
		a, ok := k.Unassign(key)
		off, mok := km.unassign(key)
		if ok != mok || (ok && a != p.AddrAt(off)) {
			return fmt.Errorf("Unassign(%d) = %s %v, model %d %v", key, a, ok, off, mok)
		}
	case 3:
		a, ok := k.Lookup(key)
		off, mok := km.byKey[key]
		if ok != mok || (ok && a != p.AddrAt(off)) {
			return fmt.Errorf("Lookup(%d) = %s %v, model %d %v", key, a, ok, off, mok)
		}
	default:
		off := offsetArg(arg, km.m)
		owner, ok := k.Owner(p.AddrAt(off))
		mowner, mok := km.byOff[off]
		if ok != mok || owner != mowner {
			return fmt.Errorf("Owner(%d) = %d %v, model %d %v", off, owner, ok, mowner, mok)
		}
	}
	return keyedInvariants(k, km)
}

func keyedInvariants(k *Keyed[uint8], km *keyedModel) error {
	if k.Len() != len(km.byKey) || k.Pool().Used() != uint64(len(km.m.taken)) {
		return fmt.Errorf("Len %d Used %d, model %d %d", k.Len(), k.Pool().Used(), len(km.byKey), len(km.m.taken))
	}
	var prev netip.Addr
	var err error
	k.Range(func(key uint8, a netip.Addr) bool {
		if prev.IsValid() && !prev.Less(a) {
			err = fmt.Errorf("Range: %s after %s", a, prev)
		}
		if off, ok := km.byKey[key]; !ok || k.Pool().AddrAt(off) != a {
			err = errors.Join(err, fmt.Errorf("Range: %d holds %s, model %d %v", key, a, off, ok))
		}
		prev = a
		return err == nil
	})
	return err
}

// FuzzKeyed runs Assign, AssignAddr, Unassign, Lookup and Owner decoded
// from data on a Keyed pool and on the reference model.
func FuzzKeyed(f *testing.F) {
	f.Add([]byte{0, 0x0a, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 1, 1, 0xc0, 1, 2, 0x40, 2, 1, 0})
	f.Add([]byte{10, 0x02, 0, 0, 5, 0, 1, 5, 0x41, 1, 6, 0x41, 4, 0, 0x41, 2, 5, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, rest, ok := harnessFrom(t, data)
		if !ok {
			return
		}
		for _, p := range h.pools {
			km := &keyedModel{m: cloneModel(h.m), byKey: map[uint8]uint64{}, byOff: map[uint64]uint8{}}
			k := newKeyed[uint8](p)
			for i := 0; i+2 < len(rest) && i < 3*maxFuzzOps; i += 3 {
				if err := keyedStep(k, km, rest[i], rest[i+1]&15, rest[i+2]); err != nil {
					t.Fatalf("%T: %v", p.bits, err)
				}
			}
		}
	})
}

func cloneModel(m *model) *model {
	c := *m
	c.taken = maps.Clone(m.taken)
	return &c
}

// FuzzConfig builds pools from arbitrary prefixes and reservations and
// checks New against the model (accepted or not, Size, the window edges)
// and the address arithmetic (AddrAt and OffsetOf are inverse).
func FuzzConfig(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0}, 24, uint64(2), uint64(2), uint64(7))
	f.Add([]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 64, uint64(2), uint64(2), uint64(1<<63))
	f.Add([]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 3, uint64(0), uint64(1<<63), allOnes)
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, 120, uint64(0), uint64(0), uint64(3))
	f.Fuzz(func(t *testing.T, ip []byte, bits int, lo, hi, off uint64) {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		cfg := Config{Prefix: netip.PrefixFrom(a, bits), ReserveLow: lo, ReserveHigh: hi,
			Reserved: []netip.Addr{a, a.Next(), a.Prev(), a.Unmap()}}
		m, mok := newModel(cfg)
		p, err := New(cfg)
		if mok != (err == nil) {
			t.Fatalf("New(%+v): %v, model accepts: %v", cfg, err, mok)
		}
		if err != nil {
			return
		}
		if p.Size() != m.size || p.Used()+p.Free() != p.Size() {
			t.Fatalf("Size %d Free %d, model %d", p.Size(), p.Free(), m.size)
		}
		if !p.Contains(p.AddrAt(m.lo)) || !p.Contains(p.AddrAt(m.hi)) {
			t.Fatalf("window [%d, %d] not contained", m.lo, m.hi)
		}
		if b := p.AddrAt(off); b.IsValid() {
			if got, ok := p.OffsetOf(b); !ok || got != off || !p.Prefix().Contains(b) {
				t.Fatalf("OffsetOf(AddrAt(%d) = %s) = %d, %v", off, b, got, ok)
			}
		} else if off <= m.top {
			t.Fatalf("AddrAt(%d) invalid, top %d", off, m.top)
		}
		got, err := p.Allocate()
		want, merr := m.allocate()
		if errKind(err) != errKind(merr) || (err == nil && got != p.AddrAt(want)) {
			t.Fatalf("Allocate = %s %v, model %d %v", got, err, want, merr)
		}
	})
}
