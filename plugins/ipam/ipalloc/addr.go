package ipalloc

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// base converts between the addresses of a prefix and their offsets from
// its first address, with 128-bit arithmetic on two words.
type base struct {
	prefix netip.Prefix // masked
	is4    bool
	hi, lo uint64 // the first address; IPv4 in the low 32 bits of lo
	top    uint64 // the largest offset: N-1, capped at 2^64-1
}

func newBase(prefix netip.Prefix, top uint64) base {
	b := base{prefix: prefix, is4: prefix.Addr().Is4(), top: top}
	if b.is4 {
		a4 := prefix.Addr().As4()
		b.lo = uint64(binary.BigEndian.Uint32(a4[:]))
		return b
	}
	b.hi, b.lo = split(prefix.Addr().As16())
	return b
}

func split(a [16]byte) (hi, lo uint64) {
	return binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
}

// offset returns the offset of a inside the prefix; false if a is outside
// it or beyond the cap. An IPv4-mapped IPv6 address counts as its IPv4
// address in an IPv4 prefix; an address with a zone is outside (as for
// netip.Prefix.Contains). The subtraction itself is the containment test:
// the prefix is masked, so a is inside it exactly when a - first <= top.
func (b *base) offset(a netip.Addr) (uint64, bool) {
	if !b.prefix.IsValid() {
		return 0, false
	}
	if b.is4 {
		if a.Is4In6() {
			a = a.Unmap()
		}
		if !a.Is4() {
			return 0, false
		}
		a4 := a.As4()
		off := uint64(binary.BigEndian.Uint32(a4[:]) - uint32(b.lo))
		return off, off <= b.top
	}
	if !a.Is6() || a.WithZone("") != a {
		return 0, false
	}
	hi, lo := split(a.As16())
	off, borrow := bits.Sub64(lo, b.lo, 0)
	d, _ := bits.Sub64(hi, b.hi, borrow)
	return off, d == 0 && off <= b.top
}

// addr returns the address at offset off; the zero Addr if off is beyond
// the prefix or the cap.
func (b *base) addr(off uint64) netip.Addr {
	if !b.prefix.IsValid() || off > b.top {
		return netip.Addr{}
	}
	if b.is4 {
		var a4 [4]byte
		binary.BigEndian.PutUint32(a4[:], uint32(b.lo+off))
		return netip.AddrFrom4(a4)
	}
	lo, carry := bits.Add64(b.lo, off, 0)
	var a16 [16]byte
	binary.BigEndian.PutUint64(a16[:8], b.hi+carry)
	binary.BigEndian.PutUint64(a16[8:], lo)
	return netip.AddrFrom16(a16)
}

// offsetIn returns the offset of a inside prefix (masked).
func offsetIn(prefix netip.Prefix, a netip.Addr) (uint64, bool) {
	b := newBase(prefix, allOnes)
	return b.offset(a)
}
