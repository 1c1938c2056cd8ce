// Package etcd is the "etcd" plugin: a kvdb.Store on an etcd cluster, or
// on an in-process etcd server when none is configured. Its config file is
// etcd.conf (see the sample next to this file for every key and default).
//
// Caller duties, in order:
//  1. Build the plugin with NewPlugin(opts...) in cmd/ (UseDeps to wire the
//     optional StatusCheck health reporter, UseConf to change the base
//     configuration) and let the agent run it.
//  2. Expect Init to: load etcd.conf, take endpoints from the file, else
//     from env ETCD_ENDPOINTS; with none (or embedded: true) start an etcd
//     server on loopback in embedded-data-dir; create the client, log which
//     etcd is used ("using etcd": endpoints, embedded or not, the data
//     directory of the embedded one) and probe it within dial-timeout. An unreachable etcd fails Init with an error
//     naming the endpoints, unless allow-delayed-start is set.
//  3. In your own Init, register work that needs etcd with OnConnect (it
//     runs at once if connected, else after the first successful probe) and
//     resync work with OnReconnect. Callbacks run on the plugin's monitor
//     goroutine: keep them short, hand long work to your own goroutine.
//  4. AfterInit registers the health probe with StatusCheck (readiness
//     only: an etcd outage must not restart the agents) and starts the
//     monitor: a probe every probe-interval while connected (every
//     reconnect-interval while not). A failed probe reports health.Error;
//     the next successful one reports health.OK and, with
//     resync-after-reconnect, calls every OnReconnect callback once.
//  5. Use the plugin as a kvdb.Store. Each request is bounded by
//     operation-timeout. Watches survive short outages (the client resumes
//     them); a watch whose start revision was compacted (auto-compact)
//     closes its channel: List and Watch again. So does every watch when
//     the store behind the endpoints is found replaced (below).
//  6. Close (the agent calls it) stops the monitor and auto-compaction,
//     ends every watch, closes the client and stops the embedded server,
//     waiting for every goroutine the plugin started.
//
// # A replaced store
//
// The etcd client resumes a watch after an outage from the revision it had
// reached. If the endpoints now reach another store (restored from an old
// snapshot, a wiped member, another cluster), that revision means nothing
// there: a watch would wait, silent, until the new store reaches it. The
// plugin implements kvdb.ReplaceNotifier: the identity (identity.go) is
// checked on the answers of the health probe, Get, List, Put, Delete and
// Txn (an answer whose cluster ID differs, or whose revision is below one
// seen before its request was sent, comes from another store) and on every
// watch answer (cluster ID only: a member may serve watches from a state a
// little behind). When a replacement is found, every watch started before
// it ends (its channel closes), the replacement is logged, and the monitor
// calls the OnStoreReplaced callbacks, whatever resync-after-reconnect
// says. The probe finds it within one probe-interval of the new store
// answering. A new store with the same cluster ID whose revision already
// passed the last one seen is not told apart.
//
// Owners: the identity (cluster ID, highest revision, epoch, the registry
// of live watches, the callbacks) is guarded by its mutex and changed only
// through its methods, by whichever goroutine got the answer; the queue of
// replacements found is drained by the monitor goroutine alone. The
// connection state is guarded by its own mutex and written by Init and the
// monitor.
//
// NewSession gives a lease-backed concurrency.Session with session-ttl for
// keys that must vanish with the agent and for elections.
//
// ClaimPresence implements kvdb.PresenceStore: a key bound to a lease of
// the caller's TTL, created if absent or taken over when it already holds
// the caller's exact value, kept alive on a goroutine the plugin tracks
// (Close ends it without revoking, like a killed process). Its Lost channel
// closes when the lease expired, was revoked or went one TTL without a
// keep-alive answer.
//
// Campaign implements kvdb.ElectionStore on etcd's election recipe: a
// session of the caller's TTL and a key under prefix+"/" that leads once
// every older key is gone. The Leadership's Fence compares the leader
// key's mod revision, so a transaction that carries it fails once the key
// expired, was deleted or resigned; its Done channel closes then (a
// goroutine the plugin tracks watches the key and the session). Close
// ends every session without resigning, like a killed process: the next
// candidate leads when the lease expires.
package etcd
