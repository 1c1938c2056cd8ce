// Package pool is the in-memory pool engine of the Cluster API IPAM
// provider: it parses a ContivIPPool spec and hands out its addresses to
// owners (IPAddressClaims). It is the single source of the provider's
// allocation decisions: the provider rebuilds it from the existing
// IPAddresses at start and then asks it, never a cache, which address is
// free. It is pure and deterministic: no Kubernetes client, I/O, clock,
// goroutines or logging (time comes in as an argument). Addresses are
// served by engine/ipalloc pools; there is no second bitmap.
//
// # The spec (ParseSpec)
//
// Every error is a *SpecError (errors.Is ErrInvalidSpec) that names the
// field, the index and the value:
//
//	spec.addresses[2] "10.0.0.9-10.0.0.1": the range ends before it starts
//
// ParseSpec first normalises (spaces around entries and around the dash of
// a range are trimmed, an empty allocationStrategy is LowestFree), then
// validates, whatever the CRD validation already checked:
//
//   - An entry of addresses or excludedAddresses is an IP, a range
//     first-last (first <= last, one family) or a CIDR. A CIDR with host
//     bits set (10.0.0.5/24) is refused, naming the network it would be:
//     the writer may have meant one address or the whole network. Zones
//     and IPv4-mapped IPv6 addresses (::ffff:10.0.0.1) are refused.
//   - The first entry of addresses sets the family; every other entry, the
//     exclusions and the gateway must be of it. prefix is within 0-32
//     (IPv4) or 0-128 (IPv6). addresses must not be empty.
//   - Overlapping and adjacent entries merge; that is not an error, and
//     neither is an exclusion outside the addresses.
//   - Never handed out: the gateway, the excluded addresses and, of each
//     CIDR entry, the network and broadcast addresses for IPv4 shorter
//     than /31 and the subnet-router anycast address (the first) for IPv6
//     shorter than /127. This last rule is per CIDR entry and wins over
//     every other entry (10.0.0.0/25 and 10.0.0.128/25 hand out neither
//     .127 nor .128; 10.0.0.0/24 plus 10.0.0.0 does not hand out .0).
//     Single IPs and ranges are handed out whole. There is no field to
//     hand out the reserved addresses of a CIDR: write a range instead.
//   - Something must be left to hand out, and the pool must have at most
//     MaxParts parts (below): an IPv6 entry over more than MaxParts /64s
//     (shorter than a /52) is refused.
//   - addressReuseGracePeriod is not negative; allocationStrategy is
//     LowestFree or NextFit.
//
// # Representation
//
// The addresses left form sorted runs; each run is cut at IPv6 /64
// boundaries and each piece, a part, is one ipalloc.Pool over the smallest
// prefix covering it, with ReserveLow and ReserveHigh cutting the window
// to exactly the piece. So memory follows the pieces and what is in use,
// not the size of the addresses: an IPv6 /64 entry is one sparse
// ipalloc.Pool, a few hundred bytes while empty; an IPv4 run of up to
// 2^20 addresses is dense (about 130 KiB per 2^20 addresses).
//
// # Allocation
//
//   - LowestFree hands out the lowest free address of the whole pool,
//     across its parts.
//   - NextFit hands out the first free address above the last one handed
//     out (Cursor), wrapping around at the top of the pool; at first, and
//     after a restart unless SetCursor is called, it starts at the bottom.
//   - Allocate is idempotent per owner: an owner holding an address gets
//     it again, even one out of range.
//   - Release puts the address in its grace period, until the time passed
//     plus addressReuseGracePeriod: it is used, and not free, until then
//     and free from then on. Every method that takes a time first frees
//     the addresses whose grace period is over at that time.
//   - Counts: Total is what the spec hands out, saturating at MaxInt64 (an
//     IPv6 /64 is 2^64 addresses); Used counts the addresses held in range
//     and those in their grace period; Free is Total-Used; OutOfRange
//     counts the owners whose address the spec does not hand out.
//
// # Caller duties
//
//  1. Parse the spec with ParseSpec. On error, report it (the pool is not
//     Ready) and do not build or change the pool.
//  2. Keep one Pool per pool object, under one owner that serialises every
//     call, queries included (they free expired addresses): a Pool is not
//     safe for concurrent use.
//  3. Name owners uniquely across namespaces (the claim's namespace and
//     name, or its UID): the engine compares owners as strings. For a
//     GlobalContivIPPool the owners of all namespaces share one Pool.
//  4. At start, build the pool with New and Restore every existing
//     IPAddress of the pool (from a live list, not only a cache that may
//     be stale) before the first Allocate. An error wrapping ErrTaken is a
//     duplicate: the second IPAddress of an address or of an owner; keep
//     the first, report the second. Optionally SetCursor to the last
//     address handed out, for NextFit.
//  5. Allocate, then create the IPAddress; if creating it fails, Release
//     the owner so that nothing is left half-done (the address then sits
//     out its grace period: it may have been seen). An error wrapping
//     ErrExhausted: requeue the claim at NextExpiry, or wait for a
//     Release or a spec change when there is none.
//  6. Release when the IPAddress (or the claim) goes away.
//  7. When the spec changes, ParseSpec it and replace the pool with
//     Rebuild: the owners keep their addresses, those the new spec does not
//     hand out count as OutOfRange and are returned, so that the provider
//     can report them.
//  8. Write Counts into the pool status.
//
// # The provider (Provider, PoolReconciler, Setup)
//
// The Provider is the one owner of the engines: one Pool per pool object
// (kind, namespace, name, UID) in a map, every call under Provider.mu,
// whatever the number of claim workers. It follows the duties above:
//
//   - A pool's engine is built the first time a claim or the pool
//     controller needs it, from the pool's IPAddresses listed through the
//     manager's APIReader (the API server, not the cache: duty 4).
//   - EnsureAddress: an IPAddress that exists already has its address
//     restored for the claim; otherwise the engine allocates (idempotent
//     per claim, so a stale cache that makes the reconciler ask again gets
//     the same address). ErrExhausted becomes ipamutil.ErrPoolExhausted;
//     a spec that does not parse, or a pool being deleted (for a claim
//     that holds nothing), ipamutil.ErrPoolNotReady.
//   - ReleaseAddress: the grace period counts from the claim's deletion
//     timestamp plus one second (it is cut to whole seconds); the release
//     asks for a requeue until then, so the IPAddress (and the claim) stay
//     and a restarted provider rebuilds the engine with the address still
//     used. Then ipamutil deletes the IPAddress.
//   - A new spec generation rebuilds the engine (duty 7).
//   - PoolReconciler writes the counts and the Ready condition (reason
//     InvalidSpec with the parse error), adds the ProtectPool finalizer,
//     and removes it only when no IPAddress of the pool is left; the
//     deleted pool's engine is then dropped.
//
// Setup takes the served Cluster API versions (Options.Versions, from
// ipamutil.DiscoverVersions): the claim reconciler, the IPAddress watch of
// the pool controllers and the Provider's readers (Reader, Claims wrapped
// with ipamutil.NewReader) all talk them, and the engine sees v1beta2
// objects whatever they are.
//
// Left to the deployment: one serving replica (the binary elects it with
// a Lease), so that no other process decides for the same pools.
package pool
