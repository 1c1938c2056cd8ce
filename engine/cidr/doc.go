// Package cidr is the address arithmetic of the agent: the address at an
// offset inside a prefix and the offset of an address, the i-th subnet of
// a given length and the number of the subnet holding an address, the last
// address, an offset added to or subtracted from an address, and the number
// of host bits. IPv4 and IPv6 alike, on netip values, with 128-bit
// arithmetic on two uint64 words (math/bits): no big.Int, and nothing here
// allocates.
//
// It is a leaf: no state, no I/O, no logging, and it imports nothing of
// this repository, so that the allocator engine (engine/ipalloc), the
// IPAM plugin and contivconf all use this one copy.
//
// # Rules shared by every function
//
//   - A prefix is masked first: 10.1.2.3/16 means 10.1.0.0/16. Offsets
//     count from the first address of the masked prefix.
//   - An address with an IPv6 zone (fe80::1%eth0) is inside no prefix, as
//     for netip.Prefix.Contains. Add and Sub keep the zone.
//   - An IPv4-mapped IPv6 address (::ffff:10.1.2.3) counts as its IPv4
//     address inside an IPv4 prefix. Anywhere else it is the IPv6 address it
//     is written as (Add works on its 128 bits and never unmaps it).
//   - Offsets and subnet numbers are uint64. A prefix of more than 2^64
//     addresses (IPv6 shorter than /64) has offsets that do not fit: Offset
//     and SubnetIndex say so with ErrOverflow, Block caps at 2^64-1.
//
// # Errors
//
// Every error wraps one of the sentinels ErrInvalid (an invalid prefix or
// address, or a prefix length that does not fit), ErrOutOfRange (an offset
// or subnet number beyond the prefix, an address outside it) or ErrOverflow
// (a result that does not fit: past either end of the address family, or an
// offset of 2^64 or more), and names the values; callers branch with
// errors.Is. No input makes the package panic.
//
// # Caller duties
//
//  1. Nothing to set up: the functions are pure and safe for concurrent use.
//  2. To convert many offsets of one prefix (an allocator's hot path),
//     build a Block once with NewBlock and call its methods: they check
//     nothing twice and report misses with a bool, not an error.
package cidr
