package ipalloc

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/contiv-ipam/agent/engine/cidr"
)

// Config describes a pool: a prefix and the parts of it that are never
// handed out. Offsets count from the first address of the masked prefix.
type Config struct {
	// Prefix is the pool. New masks it (Prefix.Masked()), so 1.2.3.4/16
	// means 1.2.0.0/16. IPv4 or IPv6, any length.
	Prefix netip.Prefix
	// ReserveLow: offsets [0, ReserveLow) are never handed out (2 keeps
	// the network address and the gateway at offset 1).
	ReserveLow uint64
	// ReserveHigh: the top ReserveHigh offsets of the prefix are never
	// handed out (2 keeps the NAT loopback and the broadcast address). For
	// a prefix of more than 2^64 addresses the top offsets lie beyond the
	// window cap anyway, so ReserveHigh has no effect there.
	ReserveHigh uint64
	// Reserved lists more addresses that are never handed out. Addresses
	// outside the window (or invalid) are ignored; duplicates are fine.
	Reserved []netip.Addr
}

// layout is the bitmap representation of a pool; auto picks by size.
type layout int

const (
	auto layout = iota
	denseLayout
	sparseLayout
)

// Validate reports whether New would accept the config: the prefix is
// valid and the window holds at least one address that is not reserved.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolved is a validated config: the masked prefix, the window and the
// reserved window indices.
type resolved struct {
	blk      cidr.Block // the masked prefix; MaxOffset is N-1, capped at 2^64-1
	lo, hi   uint64     // the window, inclusive offsets
	reserved []uint64   // sorted window indices (offset-lo) of Config.Reserved
}

// resolve normalises the config, then validates it.
func (c Config) resolve() (resolved, error) {
	if !c.Prefix.IsValid() {
		return resolved{}, fmt.Errorf("ipalloc: invalid prefix %q", c.Prefix.String())
	}
	r := resolved{blk: cidr.NewBlock(c.Prefix)}
	prefix, top := r.blk.Prefix(), r.blk.MaxOffset()
	r.hi = top
	if cidr.HostBits(prefix) <= 64 {
		if c.ReserveHigh > top {
			return resolved{}, fmt.Errorf("ipalloc: pool %s: ReserveHigh %d covers the whole prefix", prefix, c.ReserveHigh)
		}
		r.hi = top - c.ReserveHigh
	}
	r.lo = c.ReserveLow
	if r.lo > r.hi {
		return resolved{}, fmt.Errorf("ipalloc: pool %s: empty window (ReserveLow %d, ReserveHigh %d)", prefix, c.ReserveLow, c.ReserveHigh)
	}
	r.reserved = r.reservedIndices(c.Reserved)
	if r.size() == 0 {
		return resolved{}, fmt.Errorf("ipalloc: pool %s: every address of the window is reserved", prefix)
	}
	return r, nil
}

// reservedIndices returns the sorted, unique window indices of addrs inside
// the window.
func (r resolved) reservedIndices(addrs []netip.Addr) []uint64 {
	var idx []uint64
	for _, a := range addrs {
		off, ok := r.blk.Offset(a)
		if ok && off >= r.lo && off <= r.hi {
			idx = append(idx, off-r.lo)
		}
	}
	slices.Sort(idx)
	return slices.Compact(idx)
}

// size is the number of allocatable addresses, saturating at 2^64-1.
func (r resolved) size() uint64 {
	span, n := r.hi-r.lo, uint64(len(r.reserved))
	switch {
	case n > 0:
		return span - (n - 1)
	case span == allOnes:
		return allOnes
	default:
		return span + 1
	}
}
