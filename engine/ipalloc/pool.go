package ipalloc

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/contiv-ipam/agent/engine/cidr"
)

// Pool hands out the addresses of one prefix, next-fit. It is not safe for
// concurrent use: its owner serialises every call. The zero Pool (and a nil
// *Pool) is an empty pool: Size is 0, Allocate returns ErrPoolExhausted and every
// address is out of range.
type Pool struct {
	blk      cidr.Block // the prefix: offset <-> address
	lo, hi   uint64     // the window, inclusive offsets
	reserved []uint64   // sorted window indices of Config.Reserved
	size     uint64     // allocatable addresses (saturated)
	used     uint64     // allocated addresses (reserved ones not counted)
	cursor   uint64     // offset of the last address handed out
	cursor0  uint64     // the initial cursor
	bits     bitset     // window index -> taken (allocated or reserved)
}

// New returns an empty pool for cfg, or an error that names what is wrong
// with it: an invalid prefix, an empty window, or a window that holds only
// reserved addresses.
func New(cfg Config) (*Pool, error) { return newPool(cfg, auto) }

func newPool(cfg Config, l layout) (*Pool, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	p := &Pool{
		blk:      r.blk,
		lo:       r.lo,
		hi:       r.hi,
		reserved: r.reserved,
		size:     r.size(),
	}
	p.cursor0 = p.hi
	if p.lo > 0 {
		p.cursor0 = p.lo - 1
	}
	span := p.hi - p.lo
	if l == denseLayout || (l == auto && span <= denseMaxSpan) {
		p.bits = newDense(span)
	} else {
		p.bits = newSparse()
	}
	p.Reset()
	return p, nil
}

// ready reports whether the pool was built by New.
func (p *Pool) ready() bool { return p != nil && p.bits != nil }

// Prefix returns the (masked) prefix of the pool.
func (p *Pool) Prefix() netip.Prefix {
	if !p.ready() {
		return netip.Prefix{}
	}
	return p.blk.Prefix()
}

// Allocate hands out the first free address after the cursor, wrapping
// around at the end of the window, and moves the cursor to it. It returns
// an error wrapping ErrPoolExhausted when no address is free.
func (p *Pool) Allocate() (netip.Addr, error) {
	off, err := p.AllocateOffset()
	if err != nil {
		return netip.Addr{}, err
	}
	return p.blk.Addr(off), nil
}

// AllocateOffset is Allocate on offsets: it returns the offset of the
// address handed out.
func (p *Pool) AllocateOffset() (uint64, error) {
	if !p.ready() || p.used >= p.size {
		return 0, p.errFull()
	}
	last := p.hi - p.lo
	i, ok := p.bits.nextFree(p.start())
	if !ok || i > last {
		if i, ok = p.bits.nextFree(0); !ok || i > last {
			return 0, p.errFull()
		}
	}
	p.bits.set(i)
	p.used++
	p.cursor = p.lo + i
	return p.cursor, nil
}

// start returns the window index where the search for the next address
// begins: the one after the cursor, or the first one when the cursor is
// below the window, at its end or beyond it.
func (p *Pool) start() uint64 {
	if p.cursor < p.lo || p.cursor >= p.hi {
		return 0
	}
	return p.cursor - p.lo + 1
}

func (p *Pool) errFull() error {
	return fmt.Errorf("allocate in %s (%d addresses): %w", p.Prefix(), p.Size(), ErrPoolExhausted)
}

// AllocateAddr claims the address a, which must be inside the window, not
// reserved and free; otherwise the error wraps ErrOutOfRange, ErrReserved
// or ErrTaken. It does not move the cursor.
func (p *Pool) AllocateAddr(a netip.Addr) error {
	off, ok := p.windowOffset(a)
	if !ok {
		return p.errAddrRange("allocate", a)
	}
	if err := p.claim(off - p.lo); err != nil {
		return fmt.Errorf("allocate %s in %s: %w", a, p.blk.Prefix(), err)
	}
	return nil
}

// AllocateAtOffset is AllocateAddr on offsets.
func (p *Pool) AllocateAtOffset(off uint64) error {
	if !p.inWindow(off) {
		return p.errOffsetRange("allocate", off)
	}
	if err := p.claim(off - p.lo); err != nil {
		return fmt.Errorf("allocate offset %d (%s) in %s: %w", off, p.blk.Addr(off), p.blk.Prefix(), err)
	}
	return nil
}

// claim takes window index i; it returns a bare sentinel.
func (p *Pool) claim(i uint64) error {
	if p.bits.set(i) {
		p.used++
		return nil
	}
	if p.isReserved(i) {
		return ErrReserved
	}
	return ErrTaken
}

// Release frees the allocated address a. The error wraps ErrOutOfRange
// when a is not inside the window and ErrNotAllocated when it is not
// allocated (for a reserved address, ErrReserved as well).
func (p *Pool) Release(a netip.Addr) error {
	off, ok := p.windowOffset(a)
	if !ok {
		return p.errAddrRange("release", a)
	}
	if err := p.unclaim(off - p.lo); err != nil {
		return fmt.Errorf("release %s in %s: %w", a, p.blk.Prefix(), err)
	}
	return nil
}

// ReleaseOffset is Release on offsets.
func (p *Pool) ReleaseOffset(off uint64) error {
	if !p.inWindow(off) {
		return p.errOffsetRange("release", off)
	}
	if err := p.unclaim(off - p.lo); err != nil {
		return fmt.Errorf("release offset %d (%s) in %s: %w", off, p.blk.Addr(off), p.blk.Prefix(), err)
	}
	return nil
}

// unclaim frees window index i; it returns a bare sentinel.
func (p *Pool) unclaim(i uint64) error {
	if p.isReserved(i) {
		return errReservedRelease
	}
	if !p.bits.clear(i) {
		return ErrNotAllocated
	}
	p.used--
	return nil
}

// IsAllocated reports whether a is allocated (reserved addresses are not).
func (p *Pool) IsAllocated(a netip.Addr) bool {
	off, ok := p.windowOffset(a)
	return ok && p.bits.test(off-p.lo) && !p.isReserved(off-p.lo)
}

// Contains reports whether a is inside the allocatable window; reserved
// addresses inside it are contained.
func (p *Pool) Contains(a netip.Addr) bool {
	_, ok := p.windowOffset(a)
	return ok
}

// Cursor returns the address the next Allocate starts after: the last
// address handed out by Allocate, or set by SetCursor. Initially it is the
// address at offset ReserveLow-1, or the last address of the window when
// ReserveLow is 0, so the first Allocate gives the first address of the
// window.
func (p *Pool) Cursor() netip.Addr {
	if !p.ready() {
		return netip.Addr{}
	}
	return p.blk.Addr(p.cursor)
}

// SetCursor makes the next Allocate start after a, which must be inside
// the prefix (and below the 2^64 cap); otherwise the error wraps
// ErrOutOfRange. Callers restore the cursor they persisted so that a
// restart does not hand out recently released addresses again.
func (p *Pool) SetCursor(a netip.Addr) error {
	off, ok := p.OffsetOf(a)
	if !ok {
		return fmt.Errorf("set cursor to %s: outside %s: %w", a, p.Prefix(), ErrOutOfRange)
	}
	p.cursor = off
	return nil
}

// Size returns the number of allocatable addresses: the window minus the
// reserved addresses inside it, saturating at math.MaxUint64 (a window of
// exactly 2^64 addresses reports 2^64-1).
func (p *Pool) Size() uint64 {
	if !p.ready() {
		return 0
	}
	return p.size
}

// Used returns the number of allocated addresses.
func (p *Pool) Used() uint64 {
	if !p.ready() {
		return 0
	}
	return p.used
}

// Free returns Size() - Used().
func (p *Pool) Free() uint64 { return p.Size() - p.Used() }

// Range calls fn with every allocated address in ascending order until fn
// returns false. fn must not modify the pool.
func (p *Pool) Range(fn func(netip.Addr) bool) {
	if fn == nil {
		return
	}
	p.rangeOffsets(func(off uint64) bool { return fn(p.blk.Addr(off)) })
}

// rangeOffsets calls fn with the offset of every allocated address in
// ascending order until fn returns false.
func (p *Pool) rangeOffsets(fn func(off uint64) bool) {
	if !p.ready() || fn == nil {
		return
	}
	p.bits.each(func(i uint64) bool {
		return p.isReserved(i) || fn(p.lo+i)
	})
}

// Reset releases every address and moves the cursor back to its initial
// position.
func (p *Pool) Reset() {
	if !p.ready() {
		return
	}
	p.bits.reset()
	for _, i := range p.reserved {
		p.bits.set(i)
	}
	p.used = 0
	p.cursor = p.cursor0
}

// AddrAt returns the address at offset off from the first address of the
// prefix, inside the window or not; the zero Addr if off is beyond the
// prefix.
func (p *Pool) AddrAt(off uint64) netip.Addr {
	if !p.ready() {
		return netip.Addr{}
	}
	return p.blk.Addr(off)
}

// OffsetOf returns the offset of a from the first address of the prefix;
// false if a is outside the prefix or its offset is beyond the window cap
// (2^64-1). In an IPv4 pool an IPv4-mapped IPv6 address is taken as its
// IPv4 address.
func (p *Pool) OffsetOf(a netip.Addr) (uint64, bool) {
	if !p.ready() {
		return 0, false
	}
	return p.blk.Offset(a)
}

// windowOffset returns the offset of a if a is inside the window.
func (p *Pool) windowOffset(a netip.Addr) (uint64, bool) {
	off, ok := p.OffsetOf(a)
	return off, ok && off >= p.lo && off <= p.hi
}

// inWindow reports whether off is inside the window.
func (p *Pool) inWindow(off uint64) bool {
	return p.ready() && off >= p.lo && off <= p.hi
}

// isReserved reports whether window index i is one of Config.Reserved.
func (p *Pool) isReserved(i uint64) bool {
	if len(p.reserved) == 0 {
		return false
	}
	_, found := slices.BinarySearch(p.reserved, i)
	return found
}

func (p *Pool) errAddrRange(op string, a netip.Addr) error {
	if !p.ready() {
		return fmt.Errorf("%s %s: empty pool: %w", op, a, ErrOutOfRange)
	}
	return fmt.Errorf("%s %s: outside %s-%s of %s: %w", op, a, p.blk.Addr(p.lo), p.blk.Addr(p.hi), p.blk.Prefix(), ErrOutOfRange)
}

func (p *Pool) errOffsetRange(op string, off uint64) error {
	if !p.ready() {
		return fmt.Errorf("%s offset %d: empty pool: %w", op, off, ErrOutOfRange)
	}
	return fmt.Errorf("%s offset %d: outside %d-%d of %s: %w", op, off, p.lo, p.hi, p.blk.Prefix(), ErrOutOfRange)
}
