// Package bolt is the "bolt" plugin: a kvdb.Store on one local bbolt file,
// for node-local durable state (pod allocations, a mirror of the kube
// state). Its config file is bolt.conf (see the sample next to this file);
// a missing file means the defaults, not a disabled plugin.
//
// Caller duties, in order:
//  1. Build the plugin with NewPlugin(opts...) (UseConf to change the base
//     configuration, UseDeps for the logger or config accessor, UseEnv for
//     the flags' environment), let the agent call RegisterFlags
//     (-bolt-recover, plus -bolt-config) and then Init, which opens or
//     creates the file (creating its parent directory). Init fails if
//     another process holds the file's lock after lock-timeout, if the
//     file holds another data format, or if it is damaged (see Damage
//     below: the error wraps ErrDamaged); every error names the path.
//  2. On ErrDamaged, the operator starts the agent once with -bolt-recover
//     (env BOLT_RECOVER=true): the file is moved aside, never deleted, and
//     the users of the store rebuild what they keep in it (IPAM: the pod
//     allocations, from the Kubernetes state at its resync). The flag does
//     nothing to a sound file (it logs that it can be dropped), nor to a
//     locked file or one of another data format.
//  3. Use the plugin as a kvdb.Store. A write returns only after it is
//     committed and fsynced: acknowledged means durable. Do not hold a
//     watch channel unread; a watcher more than watch-buffer events behind
//     is dropped (its channel is closed) and must List and Watch again.
//  4. A Watch can start at a past revision only within the in-memory
//     history (watch-history events, empty after a restart); an older
//     fromRev fails with kvdb.ErrCompacted: List and Watch from rev+1.
//  5. Call Close once (the agent does): queued writes fail with
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
// Damage: a new database is created only where no file exists. An
// existing file is opened and flock-ed by the plugin (the lock bbolt
// takes; bbolt then takes it again on the same open file), checked with
// plain reads, and only then handed to bbolt, which maps it; a damaged
// file would otherwise kill the process (SIGBUS past the end of a
// truncated file, "invalid freelist page" and other panics). The check:
//   - the file is not empty (a zero-length file is damage, not a new
//     database);
//   - the meta pages (our own reader of bbolt's layout, layout.go):
//     magic, version, checksum, a sane page size. One bad meta page is
//     what a crash in the middle of a meta write leaves, and bbolt then
//     uses the other: so do we, with a warning, provided the meta page
//     bbolt will use (the valid one with the higher txid) passes the
//     checks below. No valid meta page is damage. If the newest meta page
//     is the bad one, the last transaction is lost (normally one that
//     was never acknowledged: the crash interrupted its commit);
//   - the file covers the high-water mark (meta pgid x page size), and
//     the root and freelist pages lie below it;
//   - every page (pagewalk.go): the freelist, and each branch and leaf
//     page reachable from the root bucket, as bbolt would read it, with
//     bounds checks; also that every page is reachable or free. This
//     reads every page below the high-water mark once: 0.2 ms for 1,000
//     records, 13 ms for 100,000 (47 MiB); see BenchmarkCheckAtOpen.
//
// bbolt.Open and the first transactions (prepare) then run under a
// recover, with memory faults turned into panics (debug.SetPanicOnFault)
// for that goroutine, so anything the check missed is an error wrapping
// ErrDamaged, not a crash. A file damaged while the agent runs is not
// guarded: the process may die, and the restart then reports the damage.
//
// Revisions: the file keeps a store revision; each write request that
// changes something gets the next one, stored with every key it writes
// (KeyValue.Revision) and in the meta bucket. Stats reports commits and
// batch sizes.
package bolt
