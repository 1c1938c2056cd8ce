package cidr

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// uint128 is an address as a number, hi the upper 64 bits; an IPv4 address
// is in the low 32 bits of lo.
type uint128 struct{ hi, lo uint64 }

// fromAddr returns a as a number: IPv4 as 32 bits, anything else (an
// IPv4-mapped address too) as 128 bits.
func fromAddr(a netip.Addr) uint128 {
	if a.Is4() {
		a4 := a.As4()
		return uint128{lo: uint64(binary.BigEndian.Uint32(a4[:]))}
	}
	a16 := a.As16()
	return uint128{hi: binary.BigEndian.Uint64(a16[:8]), lo: binary.BigEndian.Uint64(a16[8:])}
}

// addr returns u as an IPv4 (low 32 bits) or IPv6 address.
func (u uint128) addr(is4 bool) netip.Addr {
	if is4 {
		var a4 [4]byte
		binary.BigEndian.PutUint32(a4[:], uint32(u.lo))
		return netip.AddrFrom4(a4)
	}
	var a16 [16]byte
	binary.BigEndian.PutUint64(a16[:8], u.hi)
	binary.BigEndian.PutUint64(a16[8:], u.lo)
	return netip.AddrFrom16(a16)
}

// add64 returns u+n and whether it carried out of 128 bits.
func (u uint128) add64(n uint64) (uint128, bool) {
	lo, c := bits.Add64(u.lo, n, 0)
	hi, c := bits.Add64(u.hi, 0, c)
	return uint128{hi: hi, lo: lo}, c != 0
}

// sub returns u-v and whether it borrowed (v > u).
func (u uint128) sub(v uint128) (uint128, bool) {
	lo, b := bits.Sub64(u.lo, v.lo, 0)
	hi, b := bits.Sub64(u.hi, v.hi, b)
	return uint128{hi: hi, lo: lo}, b != 0
}

// or returns u|v.
func (u uint128) or(v uint128) uint128 { return uint128{hi: u.hi | v.hi, lo: u.lo | v.lo} }

// shr returns u >> n, n in [0, 128].
func (u uint128) shr(n uint) uint128 {
	switch {
	case n >= 128:
		return uint128{}
	case n >= 64:
		return uint128{lo: u.hi >> (n - 64)}
	case n == 0:
		return u
	}
	return uint128{hi: u.hi >> n, lo: u.lo>>n | u.hi<<(64-n)}
}

// shl64 returns x << n as a 128-bit number, n in [0, 128]; bits shifted
// past bit 127 are lost.
func shl64(x uint64, n uint) uint128 {
	switch {
	case n >= 128:
		return uint128{}
	case n >= 64:
		return uint128{hi: x << (n - 64)}
	case n == 0:
		return uint128{lo: x}
	}
	return uint128{hi: x >> (64 - n), lo: x << n}
}

// fits reports whether u is an address of a family of width bits (32 or
// 128).
func (u uint128) fits(width int) bool {
	return width == 128 || (u.hi == 0 && u.lo>>width == 0)
}
