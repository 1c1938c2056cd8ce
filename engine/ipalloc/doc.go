// Package ipalloc is the allocator engine of the IPAM plugin: a pool of the
// addresses of one IPv4 or IPv6 prefix, handed out next-fit from a bitmap.
// It is pure and deterministic: no I/O, clock, goroutines or logging. Of
// this repository it imports only engine/cidr, the address
// arithmetic, itself a pure leaf on the standard library
// (TestImportsPointDown in the repository root keeps it so). The IPAM plugin (and the later allocators built on the
// same engine) persist and serialise around it.
//
// # The window
//
// Offsets count from the first address of the masked prefix. With N the
// number of addresses of the prefix, the allocatable window is the offsets
// [ReserveLow, N-1-ReserveHigh]; the addresses of Config.Reserved inside it
// are never handed out either. Size is the window minus those.
//
// Offsets are uint64: for a prefix of more than 2^64 addresses (IPv6
// shorter than /64) the window stops at offset 2^64-1, and ReserveHigh,
// which counts from the real top of the prefix, has no effect. A /60 per
// node works: it hands out the first 2^64 addresses of the /60.
//
// # Strategy
//
// Allocate is next-fit: it hands out the first free address after the
// cursor (the last address handed out), wrapping around at the end of the
// window. A released address is therefore not reused until the cursor has
// gone round the window, so a crash-looping pod does not get the address of
// its previous instance, whose connections may still be in flight.
//
// # Representation and cost
//
// The bitmap is made of chunks of 4096 addresses (64 words); each chunk
// has a summary word (one bit per word with a free address) and the pool
// has one bit per full chunk, so a search reads a few words even when the
// pool is 99 % full. A window of up to 2^20 addresses is dense (a slice of
// chunks, 528 bytes per 4096 addresses); a bigger one is sparse: a map
// holds only the chunks with a taken address and drops a chunk when it
// empties, so memory follows what is allocated, not the size of the
// prefix (a /64 with 1000 addresses in use holds about 1.1 KiB; addresses
// scattered over the prefix cost up to one chunk each). Allocate,
// AllocateAddr and Release and their offset forms allocate no memory on a
// dense pool; on a sparse one only when an allocation opens a chunk and
// none of the few emptied chunks kept for reuse is left, or the map grows.
//
// Keyed adds an owner index. Each key is stored once, with its offset, in
// an entry of an array; a hash table of 8-byte slots (32 bits of the key's
// hash and the entry's number, open addressing with linear probing, at
// most 3/4 full, shrunk below 1/8) finds the entry of a key, and owner
// blocks of 256 addresses hold the entry number of each owned address.
// The blocks follow the bitmap's memory rule: only the blocks with an
// owner exist (in a slice on a dense pool, in a map on a sparse one) and a
// block is dropped when its last owner goes, a few kept for reuse. Per
// held key that is the entry (the size of the key plus 8 bytes: 88 for
// the IPAM plugin's key of five strings), 11 to 22 bytes of table and 4
// bytes of block when the addresses are next to each other (a scattered
// address costs a block of about 1 KiB); about 120 bytes in all for the
// plugin's key, without the bytes of its strings. The entry array keeps
// the size of the most keys held at once, across Reset too.
//
// Every keyed operation hashes its key once (hash/maphash.Comparable) and
// reads a slot and an entry: for the plugin's key the hash alone costs
// about twice an unkeyed release and allocation, and on a pool with a
// million keys the slot, the entry and the owner block of a random key are
// cache misses the unkeyed path does not have. Assign, AssignAddr,
// Unassign, Lookup and Owner allocate no memory except when the table or
// the entry array grows, or a block opens with no spare left.
//
// # Caller duties
//
//  1. Build the pool with New (or NewKeyed) and handle its error: an
//     invalid prefix, or a window with no allocatable address (a /32 with
//     ReserveLow 2 has none).
//  2. Serialise every call: a Pool is not safe for concurrent use. Its
//     single owner takes a lock around each call or runs all of them on
//     one goroutine.
//  3. On start, restore the persisted allocations with AllocateAddr (or
//     Keyed.AssignAddr) before the first Allocate, then SetCursor to the
//     persisted last address so that next-fit goes on where it stopped.
//  4. After Allocate, persist the allocation (and the cursor); if that
//     fails, Release the address so that nothing is left half-done.
//  5. Release when the owner goes away. An error wrapping ErrNotAllocated
//     means the address was already free: treat the release as done.
//
// # Errors
//
// Conditions that callers branch on are the sentinels ErrPoolExhausted,
// ErrOutOfRange, ErrReserved, ErrTaken and ErrNotAllocated, always wrapped
// with the address or offset and the prefix; use errors.Is. No input makes
// the package panic: the zero Pool, a nil *Pool and invalid addresses give
// errors (or false, or the zero Addr).
//
// Addresses are matched as netip.Prefix.Contains does (an address with an
// IPv6 zone is outside every pool, an IPv4-mapped one included), except
// that an IPv4-mapped IPv6 address (::ffff:a.b.c.d) counts as its IPv4
// address in an IPv4 pool: the rules of package cidr, which converts
// between offsets and addresses (a cidr.Block built once per pool).
package ipalloc
