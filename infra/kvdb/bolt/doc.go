// Package bolt is the "bolt" plugin: a kvdb.Store on one local bbolt file,
// for node-local durable state (pod allocations, a mirror of the kube
// state). Its config file is bolt.conf (see the sample next to this file);
// a missing file means the defaults, not a disabled plugin.
//
// Caller duties, in order:
//  1. Build the plugin with NewPlugin(opts...) (UseConf to change the base
//     configuration, UseDeps for the logger or config accessor) and let the
//     agent call Init, which opens or creates the file (creating its parent
//     directory) and fails if another process holds its lock after
//     lock-timeout, or if the file is not a bolt database; the error names
//     the path.
//  2. Use the plugin as a kvdb.Store. A write returns only after it is
//     committed and fsynced: acknowledged means durable. Do not hold a
//     watch channel unread; a watcher more than watch-buffer events behind
//     is dropped (its channel is closed) and must List and Watch again.
//  3. A Watch can start at a past revision only within the in-memory
//     history (watch-history events, empty after a restart); an older
//     fromRev fails with kvdb.ErrCompacted: List and Watch from rev+1.
//  4. Call Close once (the agent does): queued writes fail with
//     kvdb.ErrClosed, the batch being committed completes, watches close,
//     then the file is closed.
//
// Group commit: one committer goroutine takes every queued write request
// (Put, Delete, Txn) and applies them in queue order in ONE bbolt
// transaction, so concurrent writers share one fsync. A lone writer is
// committed at once (no timer). Inside a batch each request sees the writes
// of the requests before it; a Txn whose compare fails applies nothing and
// does not affect the others. Requests are validated before they are
// queued; if a batch still fails, its requests are retried one per
// transaction. Watchers are notified after the commit, before the writers
// are answered, through buffered channels that never block the committer.
//
// Revisions: the file keeps a store revision; each write request that
// changes something gets the next one, stored with every key it writes
// (KeyValue.Revision) and in the meta bucket. Stats reports commits and
// batch sizes.
package bolt
