// Package kvdb is the key-value store API shared by the etcd and bolt
// plugins: a Broker (get, put, list, delete, compare-and-swap transactions,
// ordered watches with previous values), prefixed views, and the Store
// interface a store plugin implements. It imports no store implementation.
//
// Caller duties, in order:
//  1. Depend on kvdb.Store (or kvdb.Broker) in your plugin's Deps, never on
//     a concrete store, so that tests can pass either store.
//  2. In Init, take a view with Store.NewBroker("/my/area/") and work with
//     keys relative to it; do not build prefixes by hand.
//  3. Register Store.OnConnect for work that needs the store (a delayed
//     start may connect later) and Store.OnReconnect to resync after the
//     store was unreachable.
//  4. To follow a subtree: List it, keep its rev, then Watch(prefix, rev+1);
//     this gives every later change exactly once, in revision order. A
//     change the List already showed is not delivered again: a watch that
//     delivers nothing while nothing changes is not stuck.
//  5. When a watch channel closes while your context is still live, the
//     watch broke (compaction, overflow, store closed, store replaced): go
//     back to step 4. Cancel the watch's context when you no longer read
//     the channel. Do not re-list on a timer to catch a "silent" watch: a
//     watch is never silent while its channel is open (kvdbtest's
//     WatchesCreatedDuringWrites holds every store to it), and the cases
//     that could make it so close the channel instead.
//  6. If the store implements ReplaceNotifier (etcd), register
//     OnStoreReplaced to resync state you keep without a watch: a store
//     replaced behind its endpoints (an old snapshot, a wiped member,
//     another cluster) ends every watch and then calls it.
//  7. For read-modify-write use Txn or the helpers PutIfAbsent,
//     CompareAndSwap and CompareAndDelete in a retry loop: Get, compute,
//     swap, and start over when the swap reports false.
//  8. Branch on errors with errors.Is against the sentinels (ErrClosed,
//     ErrInvalidKey, ErrValueTooLarge, ErrInvalidTxn, ErrCompacted,
//     ErrUnknownOutcome, ErrBusy, ErrStoreFailed); a missing key is
//     found=false or existed=false, never an error.
//  9. Treat a write error that wraps ErrUnknownOutcome as "may be
//     applied" and resolve it (see "Write outcomes"); treat every other
//     write error as "not applied".
//
// # Write outcomes
//
// A write (Put, Delete, Txn, Submit) has exactly one outcome, and its
// caller learns which:
//
//  1. Applied: nil. The write is durable (bolt: fsynced; etcd: committed
//     by a quorum) and every read started afterwards sees it.
//  2. Not applied: an error that does not wrap ErrUnknownOutcome. The
//     write was not applied and never will be: it was refused (a bad
//     argument, a closed store, a full queue: ErrBusy, a request etcd
//     rejected), or its ctx ended before the store took it. A write whose
//     ctx has ended is never sent; a bolt write whose ctx ends while it
//     waits in the queue is withdrawn from the queue.
//  3. Unknown: an error wrapping ErrUnknownOutcome. The store took the
//     write and its caller cannot learn what became of it: the ctx ended
//     while bolt was committing it, bolt's commit failed with an I/O
//     error after its meta page may have reached the disk, or etcd's
//     reply was lost (a timeout, a broken connection). Only this outcome
//     needs resolving, by a read ordered after the write, never by one
//     that could overtake it (below).
//
// Resolving in bolt: bolt orders its reads. A Get or List started after a
// write returned with an unknown outcome waits for the commit that held it
// and sees the outcome. When bolt itself cannot tell (the failed commit),
// it refuses every later call with ErrStoreFailed: the file must be
// reopened (the agent restarted), and what the reopened file holds is the
// outcome.
//
// Resolving in etcd: a read cannot be ordered after a request still in
// flight, so such a write can land after its caller gave up, until etcd's
// own request timeout drops it. Resolve it with a revision check: a Txn
// conditioned on a mod revision or on a key's absence can no longer apply
// once a later write has moved what it compares. State that must not
// change behind its writer's back is therefore written with such
// conditions, and after an unknown outcome its writer reads the key and
// compares its mod revision with the one it conditioned on.
//
// A store with a write queue (bolt) also implements Submitter: a single
// writer hands it writes in its own order without waiting for each, and
// learns their outcomes, by the same three rules, as they come.
// kvdbtest.RunOutcomeContract proves each rule against both stores,
// including a stalled committer, a stalled connection and a late apply.
//
// Presence (presence.go) is a separate, optional capability of stores with
// leases (etcd): PresenceStore.ClaimPresence creates a key that lives only
// while its holder keeps a lease alive, to detect a second live instance
// of the same holder. Its caller duties:
//  1. Claim with a value that names this process (host, pid, start time):
//     the same value is taken for the same holder, so a restarted process
//     must not reuse an old value.
//  2. On *PresenceHeldError another holder's key exists; it vanishes after
//     TTL unless that holder is alive. Wait at most that long and claim
//     again, or refuse.
//  3. Watch Presence.Lost: once closed, claim again (the key may be gone or
//     taken). Release on shutdown so that a successor need not wait.
//
// Values are opaque bytes; encoding (JSON, proto) is the caller's choice.
// The shared contract every Broker must meet is tested by kvdbtest.RunContract,
// the PresenceStore contract by kvdbtest.RunPresenceContract.
package kvdb
