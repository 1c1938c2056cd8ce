package engine

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// flatEngine is the yardstick bitmap over the window of an IPv4 shape. Like
// contivEngine it holds netip.Addr values and converts on both ways, so
// that the two differ in the allocator only, not in the harness (a slot
// array of 24-byte values is a cache miss of its own on a big pool).
type flatEngine struct {
	m    *bitmap
	base uint32 // the first address of the window
	held []netip.Addr
}

func bitmapNA(s shape, _ int) string {
	if s.is6() {
		return fmt.Sprintf("n/a: the yardstick is a flat bitmap of the whole window: a /%d would need 2^%d bits", s.prefix.Bits(), 128-s.prefix.Bits())
	}
	return ""
}

func newFlat(s shape) (*bitmap, uint32, error) {
	if s.is6() {
		return nil, 0, fmt.Errorf("bitmap: %s: IPv4 only", s.prefix)
	}
	b := s.first().As4()
	return newBitmap(uint64(s.size())), binary.BigEndian.Uint32(b[:]), nil
}

func openFlat(s shape, slots int) (engine, error) {
	m, base, err := newFlat(s)
	if err != nil {
		return nil, err
	}
	return &flatEngine{m: m, base: base, held: make([]netip.Addr, slots)}, nil
}

// index is the window index of a, which must be in the window.
func (e *flatEngine) index(a netip.Addr) uint64 {
	b := a.As4()
	return uint64(binary.BigEndian.Uint32(b[:]) - e.base)
}

func (e *flatEngine) take(slot int, a netip.Addr) error {
	e.held[slot] = a
	if !e.m.take(e.index(a)) {
		return errTaken
	}
	return nil
}

func (e *flatEngine) allocate(slot int) (netip.Addr, error) {
	i, ok := e.m.next()
	if !ok {
		return netip.Addr{}, errFull
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], e.base+uint32(i))
	a := netip.AddrFrom4(b)
	e.held[slot] = a
	return a, nil
}

func (e *flatEngine) release(slot int) error {
	if !e.m.free(e.index(e.held[slot])) {
		return errNotHeld
	}
	return nil
}

func buildFlat(s shape, addrs []netip.Addr, _ *keySet) (any, error) {
	m, base, err := newFlat(s)
	if err != nil {
		return nil, err
	}
	e := &flatEngine{m: m, base: base}
	for _, a := range addrs {
		if !m.take(e.index(a)) {
			return nil, errTaken
		}
	}
	return m, nil
}
