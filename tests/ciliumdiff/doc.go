// Package ciliumdiff runs the same random sequences of calls through the
// Cilium-style allocation surface of plugins/ipam and through Cilium's own
// agent IPAM, the real pkg/ipam.IPAM of github.com/cilium/cilium v1.20.2,
// and checks that both give the same outcome to every call and hold the
// same addresses, with the same owners, after every call. It is a module
// of its own so that the main module does not depend on Cilium.
//
// # Cilium's side
//
// Cilium's code is imported and called, not copied: pkg/ipam.NewIPAM in
// cluster-pool mode, as Cilium's own tests build it (a logger, the node
// addressing with the node's pod subnets as allocation CIDRs, an agent
// configuration of that mode and the node's families; nothing else is
// read in that mode), then ConfigureAllocator, which gives each family a
// host-scope allocator. Every call goes to an exported method of the real
// type with the default pool: AllocateNext, AllocateNextWithExpiration,
// AllocateNextFamily, AllocateIP, AllocateIPString, ReleaseIP, ExcludeIP
// (BlacklistIP in the seed API), StartExpirationTimer,
// StopExpirationTimer and Dump. v1.20.2 has no release by owner (the seed
// API's ReleaseIPString): its counterpart here is ReleaseIP of every
// address Dump lists for the owner.
//
// Both sides' expiration timers run on one clock: every sequence runs in
// a testing/synctest bubble, in which Cilium's timer goroutines and our
// keeper's sweep timer run on the bubble's fake clock, and time passes
// only when a step says so (and then every timer due has fired on both
// sides once the bubble is idle).
//
// # What is compared
//
// TestDifferencesTable runs 160 random sequences of 250 calls (fixed
// seeds; -args -seqs N -steps M for more) on node 1's dual-stack pod
// subnets, 10.1.0.16/28 and fd00:10:1::10/124, 12 addresses each that
// ours hands out: AllocateNext ("", "ipv4", "ipv6"),
// AllocateNextWithExpiration, AllocateNextFamily and
// Allocator.AllocateNext; AllocateIP, AllocateIPString and
// Allocator.Allocate of a free, held, excluded, reserved or outside
// address; ReleaseIP, ReleaseIPString and Allocator.Release of those;
// ReleaseIPString of an owner; BlacklistIP; StartExpirationTimer on held
// (timed or not) and unheld addresses; StopExpirationTimer with the
// right, a stale or a wrong UUID; and time passing. After every call it
// compares the outcome class of both sides, the addresses handed out (by
// the model of next-fit for ours), the expiration UUIDs (one per address)
// and what both hold, by Dump, against a model, and the count of our
// timers against the model's. Every fourth sequence keeps our
// allocations in a bolt file, the others in memory.
//
// # Differences
//
// The differences are one table, differences in table_test.go, each with
// its reason: an outcome of the sequences that no entry explains fails
// the test; every entry has a pin (differences_test.go), its smallest
// scenario asserting both sides' behaviour, which fails once the two
// agree; and the entries the sequences meet must be met. -args -doc FILE
// writes the table as the documentation section "Differences from
// Cilium's IPAM". TestPerAddressTimersAgree, TestReleaseIPOfOneFamilyAgrees
// and TestAllocateNextBothFamiliesIsAllOrNothing pin what both do alike.
//
// Where Cilium's side must be given ours to go on alike, the sequences do
// so: AllocateNext's address (next-fit against Cilium's random pick) and
// a timer Cilium starts on an address nobody holds (stopped at once).
package ciliumdiff
