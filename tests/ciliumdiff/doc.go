// Package ciliumdiff runs the same allocation sequences through the
// Cilium-style allocation surface of plugins/ipam (Plugin.IPv4Allocator,
// IPv6Allocator, AllocateNext, ReleaseIP, BlacklistIP, Dump) and through
// Cilium's own allocator code (github.com/cilium/cilium v1.20.2), and
// checks that both give the same outcome to every call and hold the same
// addresses, with the same owners, after every call. The differences that
// are on purpose are listed below; differences_test.go pins each one with
// the smallest scenario that shows it. It is a module of its own so that
// the main module does not depend on Cilium.
//
// # What runs on Cilium's side
//
// Cilium's code is imported and called, not copied:
// pkg/ipam/service/ipallocator (NewCIDRRange, Range.Allocate, Release,
// ForEach, Snapshot, Restore, RangeSize, ErrFull, ErrAllocated,
// ErrNotInRange) and pkg/ipam/service/allocator
// (NewContiguousAllocationMap). What lives in Cilium's IPAM struct, which
// cannot be built outside Cilium's agent, is done by thin wrappers in
// rig_test.go, each named after the function it mirrors:
//
//   - ciliumFamily is hostScopeAllocator (pkg/ipam/hostscope.go): one
//     Range per family, built by NewCIDRRange as newHostScopeAllocator
//     builds it. NewCIDRRange backs the Range with NewAllocationMap, whose
//     AllocateNext starts at a random offset, and v1.20.2 has no
//     constructor of a Range over another map; ciliumFamily.allocateNext
//     restores the Range's snapshot into NewContiguousAllocationMap (first
//     fit), takes its choice and allocates it in the Range, so that
//     Cilium's addresses are deterministic.
//   - ciliumIPAM.allocateIP is IPAM.allocateIP (pkg/ipam/allocator.go):
//     the exclusion check first, then the family's Range.
//   - ciliumIPAM.allocateNextFamily is IPAM.allocateNextFamily
//     (allocator.go): the Range's next address until one is not excluded;
//     an excluded one stays allocated, owned by "<owner> (excluded)".
//   - ciliumIPAM.allocateNext is IPAM.AllocateNext (allocator.go): IPv6
//     first, then IPv4, releasing the IPv6 address when IPv4 fails.
//   - ciliumIPAM.releaseIP is IPAM.releaseIPLocked (allocator.go).
//   - ciliumIPAM.excludeIP is IPAM.ExcludeIP (pkg/ipam/ipam.go), called
//     BlacklistIP in the Cilium our API follows.
//   - ciliumIPAM.dump is IPAM.Dump (allocator.go) with
//     hostScopeAllocator.Dump.
//
// Cilium's per-family allocator does not look at exclusions (IPAM does);
// ours does, so our per-family Allocator is compared with the IPAM
// functions above restricted to one family.
//
// # What is compared
//
// TestRandomSequencesAgree runs 100 random sequences of 150 calls per
// family (fixed seeds; -args -seqs N -steps M for more) on node 1's pod
// subnets, 10.1.0.16/28 and fd00:10:1::10/124, 12 addresses each that
// ours hands out: AllocateNext, Allocate of a free, held, excluded,
// reserved, out-of-range or other-family address, Release of a held one
// or of one nobody holds, and BlacklistIP. After every call it compares
// the outcome class (ok, exhausted, taken, out of range, reserved,
// excluded, not allocated), the address handed out, and the addresses
// held with their owners (our Dump against Cilium's Range.ForEach and
// owners) with a model of what both hold. Every fourth sequence keeps our
// allocations in a bolt file, the others in memory. At the end it checks
// that the sequences met every agreement and every difference below.
// TestAllocateNextBothFamiliesIsAllOrNothing checks AllocateNext("") with
// one family, the other or both full: both sides refuse and keep nothing.
//
// # Differences on purpose
//
// D1. Ours never hands out the pod gateway (host 1) nor the NAT loopback
// (the address before the last): VPP routes the pod subnet through the
// first and masquerades through the second. Cilium's Range leaves out
// only the network and last addresses; its agent allocates its router
// address itself. So Cilium's side allocates both at the start (owner
// "reserved"), which gives both sides the same free addresses, and is
// never asked to release them (Cilium would free them). Allocate of the
// network, gateway, NAT loopback or last address is ErrReserved in ours;
// in Cilium the first and last are ErrNotInRange and the other two
// ErrAllocated (held).
//
// D2. Ours is next-fit: the first free address after the last one handed
// out, wrapping around, so a released address is not reused until the
// cursor has gone round (a crash-looping pod does not get its
// predecessor's address; Kubernetes' cidrset does the same). Cilium's
// hostScopeAllocator picks a random free address; the first-fit map used
// here the lowest. Both give the same addresses until the first release.
// After one, the sequences check that ours hands out the next-fit address
// and Cilium's side the first-fit one, then give Cilium's side ours
// instead (release and allocate by address), so that both go on holding
// the same addresses. An IPv4 address that AllocateNext("") takes and
// rolls back when IPv6 is full is not a release: the rollback restores
// the cursor too, so both hand it out next.
//
// D3. Release of an address nobody holds (free, released already,
// excluded, reserved, outside the pod subnet) is ErrNotAllocated in ours,
// so that a caller that releases the wrong address hears of it; Cilium's
// Range.Release is a documented no-op and IPAM.ReleaseIP returns nil.
//
// D4. AllocateNext("") makes one allocation of two addresses in ours,
// and ReleaseIP of either releases both (as a pod's dual-stack attachment
// is released whole); Cilium keeps one allocation per address and
// releases one. An Allocator's allocations hold one family, so the
// per-family sequences never meet this; differences_test.go pins it.
//
// D5. Exclusions: Cilium only records an excluded address and skips it
// when AllocateNext meets it, keeping it allocated as "<owner>
// (excluded)", so that Dump lists it and a release frees it until the next
// AllocateNext takes it again; ours takes a free excluded address out of
// the pool at once (Dump lists allocations only, the status counts
// exclusions). Both hand out the same addresses, keep an allocation whose
// address is excluded afterwards, refuse Allocate of an excluded address
// (before checking whether it is held) and never hand it out again. An
// exclusion of an address ours never hands out anyway (reserved, or
// outside the pod subnet) changes nothing in ours: Allocate of it is
// still ErrReserved or ErrOutOfRange, where Cilium says excluded.
//
// D6. ipallocator.RangeSize caps an IPv6 range at 2^16 addresses (one
// big.Int bit per address): for a /64 Cilium's Range covers the first
// 65536 addresses. Ours hands out the whole /64 (ipalloc's sparse bitmap
// has 64-bit offsets).
//
// D7. A per-family Allocator given an address of the other family: in
// Cilium it reaches that family's Range, ErrNotInRange for Allocate and a
// no-op for Release; ours says ipalloc.ErrOutOfRange for both (Allocate
// agrees; Release differs as in D3).
//
// D8. Ours keeps a released address out of next-fit for addressCooldown
// (30 s by default; the AWS datastore's cooldown), Cilium frees it at
// once. The sequences run ours with addressCooldown 0; the cooldown has
// its own tests in plugins/ipam.
//
// Not compared: expiration timers, IPAM pools, ReleaseIPString by owner,
// ReserveLocalRoutes, and the restore of allocations at a restart.
package ciliumdiff
