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
//     this gives every later change exactly once, in revision order.
//  5. When a watch channel closes while your context is still live, the
//     watch broke (compaction, overflow, store closed): go back to step 4.
//     Cancel the watch's context when you no longer read the channel.
//  6. For read-modify-write use Txn or the helpers PutIfAbsent,
//     CompareAndSwap and CompareAndDelete in a retry loop: Get, compute,
//     swap, and start over when the swap reports false.
//  7. Branch on errors with errors.Is against the sentinels (ErrClosed,
//     ErrInvalidKey, ErrValueTooLarge, ErrInvalidTxn, ErrCompacted); a
//     missing key is found=false or existed=false, never an error.
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
