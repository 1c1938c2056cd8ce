// Package dbwatcher feeds the controller's event loop with the Kubernetes
// state that contiv-ksr writes to etcd under codec.KSRPrefix
// ("/vnf-agent/contiv-ksr/"), and keeps a mirror of it in the local store
// (bolt) so that the agent can start while etcd is down.
//
// # Caller's duties
//
//  1. Build the watcher with New once Remote (etcd) and Local (bolt, or
//     nil) are initialised and the loop accepts events. New fails, naming
//     the field, when Remote or Loop is missing.
//  2. Call Start when the agent starts serving (AfterInit). It returns at
//     once; the first DBResync reaches the loop when etcd connects, or from
//     the mirror after DelayLocalResync.
//  3. Call RequestResync to force a remote resync (POST /controller/resync).
//  4. Call Stop before closing Remote, Local and the loop. Stop waits for
//     the watcher's goroutine and watches; it is safe twice and before
//     Start. Start after Stop does nothing.
//
// # What the loop receives
//
// One goroutine does all the work, so events reach the loop in the order
// etcd made the changes (a resync's decoding alone fans out over the
// cores and is joined before anything is applied). What it reads is
// Config.Prefixes: an agent's are dbresources.WatchPrefixes (its own
// node's pods, every Node, the rest), so that etcd sends it no other
// node's pod changes; empty means the whole of codec.KSRPrefix.
//
//  1. Remote resync, on etcd's first connection, on every reconnect, when
//     a watch breaks, when etcd reports the store replaced (below) and on
//     RequestResync: one List per prefix, decoded by dbresources.Decode.
//     The state has an
//     entry, possibly empty, for every keyword of dbresources.Keywords().
//     The mirror is then made identical to it, and the state is pushed as
//     DBResync{Local: false}. Each prefix's watch then continues from its
//     own snapshot's revision + 1, so no change is lost or seen twice.
//     One goroutine per watch relays its events to the run goroutine;
//     the changes of one prefix arrive in etcd's order, those of
//     different prefixes are not ordered with each other (no handler
//     relates a pod's change to another resource's by revision).
//  2. Changes: one KubeStateChange per watch event that changes the state.
//     PrevValue is the value the watcher last passed to the loop for that
//     key (nil for a creation), NewValue is nil for a deletion. Events
//     already covered by the snapshot or processed before are dropped
//     (Stats.DroppedStale); events whose new value equals the previous one
//     (proto.Equal) are skipped. Each change is mirrored before it is
//     pushed.
//  3. Local resync: when no remote resync has been pushed DelayLocalResync
//     after Start (and Local is set), the mirror is decoded and pushed once
//     as DBResync{Local: true}. An empty mirror pushes nothing: the loop
//     waits for etcd. The remote resync follows when etcd connects.
//
// # A replaced store, and why there is no periodic re-list
//
// The watch is trusted: a kvdb watch delivers every change from its start
// revision exactly once or closes its channel (kvdb's contract, held by
// kvdbtest against etcd, embedded and external, and bolt), so the watcher
// lists etcd only at the moments above, never on a timer. A remote store
// replaced behind the same endpoint (etcd restored from an old snapshot, a
// wiped member, another cluster) is the case that once made the watch go
// silent: etcd's client resumed it from the old store's revision. The etcd
// plugin now finds the replacement (another cluster ID, or a revision lower
// than one seen before; within one probe-interval) and, when Remote
// implements kvdb.ReplaceNotifier:
//
//  1. the plugin ends the watch: the watcher lists again at once, as for
//     any broken watch;
//  2. the plugin calls OnStoreReplaced: the watcher logs it, counts it
//     (Stats.StoreReplacements) and requests a resync, which also covers a
//     replacement found while no watch is open. A request made before a
//     resync begins is served by it, so the two make one resync.
//
// The new store's state (often empty) is pushed as a DBResync and the
// mirror follows it; an empty state is no evidence that pods are gone
// (the IPAM plugin releases nothing on it). The revisions of the new store
// start again: the resync resets the last processed revision, so its
// changes are not dropped as stale, and each new key reaches the loop.
//
// # Back-pressure: the watcher waits, it never drops
//
// The loop's queue is bounded (eventQueueSize). When it is full, the
// watcher waits for room (Loop.PushEventWait) instead of failing the push;
// meanwhile it reads no more watch events, and etcd's client buffers them
// (the server keeps a slow watcher's events until it catches up, unless a
// compaction passes them, which breaks the watch and leads to a remote
// resync). We chose waiting over coalescing because:
//
//  1. every handler sees every change, in etcd's order, with the right
//     PrevValue: a delete followed by a re-create of the same pod is two
//     events that coalescing would merge into an update, and the IPAM
//     plugin must release the old address before it sees the new pod;
//  2. the memory held is bounded by the queue plus etcd's watch buffer,
//     and a slow loop slows only the watcher, which has nothing else to do;
//  3. nothing is lost in the meantime: the mirror is written before each
//     push, and a resync request made while the watcher waits is kept (the
//     request channel holds one) and runs after the push.
//
// The wait ends when the watcher stops (Stop cancels it: Stop never hangs
// on a busy loop) or when the loop closes (api.ErrClosedController).
//
// # Errors
//
// Nothing here is fatal to the agent. A key of no known resource and a
// value that does not decode are logged, counted (Stats.DecodeErrors,
// Config.OnBadValue) and skipped. A bad value is never a delete: a key
// whose value stops decoding keeps its last good value, in the state and
// in the mirror, in the watch and at the next remote resync, where the
// last good value is the one last pushed, else the mirror's (after a
// restart); a key with no good value known is left out. Mirror
// writes that fail are logged, and the other batches are still written; a
// value larger than kvdb.MaxValueLen is left out of the mirror alone
// (logged, Stats.MirrorSkipped), every other key is written. The next
// remote resync repairs the mirror, which holds the keys of the last
// pushed state (in batches of at most
// kvdb.MaxTxnOps ops, so a crash mid-way can leave it partly updated until
// then). A failed List or Watch, and a push the loop refuses, lead to a new
// remote resync after RetryInterval: a snapshot the loop refused is never
// pushed later, it is listed again. A closed loop (api.ErrClosedController)
// is not retried until the next reconnect or RequestResync.
//
// # State and owners
//
//   - The syncer (state last pushed, revisions processed per prefix, the
//     watches, the timers): the run goroutine alone. The relays (one per
//     watch) own nothing: they pass events on, and end when the run
//     goroutine cancels the watches (it waits for them).
//   - The resync request (a channel of one): written by RequestResync from
//     any goroutine (the store's callbacks among them), read by the run
//     goroutine.
//   - connected (an atomic): set by Remote's OnConnect callback, read by
//     the run goroutine.
//   - started, stopped and the cancel func: under the Watcher's mutex.
//   - The counters (Stats): atomics, written by the run goroutine, and
//     StoreReplacements by Remote's callback goroutine.
package dbwatcher
