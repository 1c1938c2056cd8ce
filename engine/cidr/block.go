package cidr

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
)

// Block is a prefix prepared for converting many offsets to addresses and
// back: what Addr and Offset compute, without the checks and the errors.
// Offsets are capped at 2^64-1 (MaxOffset). A Block is immutable and safe
// for concurrent use; the zero Block holds no address.
type Block struct {
	prefix netip.Prefix // masked; invalid for the zero Block
	first  uint128      // the first address
	is4    bool
	max    uint64 // the largest offset: addresses-1, capped at 2^64-1
}

// NewBlock returns the Block of p (masked); the zero Block if p is invalid.
func NewBlock(p netip.Prefix) Block {
	if !p.IsValid() {
		return Block{}
	}
	p = p.Masked()
	b := Block{prefix: p, first: fromAddr(p.Addr()), is4: p.Addr().Is4(), max: math.MaxUint64}
	if hb := HostBits(p); hb < 64 {
		b.max = 1<<hb - 1
	}
	return b
}

// Prefix returns the masked prefix; the zero Prefix for the zero Block.
func (b *Block) Prefix() netip.Prefix { return b.prefix }

// MaxOffset returns the largest offset of the block: the number of its
// addresses minus one, capped at 2^64-1; 0 for the zero Block.
func (b *Block) MaxOffset() uint64 { return b.max }

// Offset returns the offset of a inside the block; false if a is outside
// it (the package rules on zones and IPv4-mapped addresses apply) or the
// offset is above MaxOffset. Because the prefix is masked, the subtraction
// is the containment test: a is inside exactly when a-first <= MaxOffset.
func (b *Block) Offset(a netip.Addr) (uint64, bool) {
	if !b.prefix.IsValid() {
		return 0, false
	}
	if b.is4 {
		if a.Is4In6() {
			if a.Zone() != "" {
				return 0, false
			}
			a = a.Unmap()
		}
		if !a.Is4() {
			return 0, false
		}
		a4 := a.As4()
		off := uint64(binary.BigEndian.Uint32(a4[:]) - uint32(b.first.lo))
		return off, off <= b.max
	}
	if !a.Is6() || a.Zone() != "" {
		return 0, false
	}
	a16 := a.As16()
	off, borrow := bits.Sub64(binary.BigEndian.Uint64(a16[8:]), b.first.lo, 0)
	d, _ := bits.Sub64(binary.BigEndian.Uint64(a16[:8]), b.first.hi, borrow)
	return off, d == 0 && off <= b.max
}

// Addr returns the address at offset off; the zero Addr if off is above
// MaxOffset (or the Block is the zero Block).
func (b *Block) Addr(off uint64) netip.Addr {
	if !b.prefix.IsValid() || off > b.max {
		return netip.Addr{}
	}
	// Inside the prefix nothing carries into the network bits. The
	// conversion is written out: this is the allocator's hot path.
	if b.is4 {
		var a4 [4]byte
		binary.BigEndian.PutUint32(a4[:], uint32(b.first.lo+off))
		return netip.AddrFrom4(a4)
	}
	lo, carry := bits.Add64(b.first.lo, off, 0)
	var a16 [16]byte
	binary.BigEndian.PutUint64(a16[:8], b.first.hi+carry)
	binary.BigEndian.PutUint64(a16[8:], lo)
	return netip.AddrFrom16(a16)
}
