// Package kvdbtest holds the contract test suite every kvdb.Broker
// implementation must pass.
//
// Caller duties, in order:
//  1. In the implementation's _test.go, call RunContract(t, open).
//  2. open(t) must return two independent clients a and b of the SAME
//     backing store (for etcd two separate client connections to one
//     server; for bolt two handles on one open database), and the store
//     must hold no keys when open returns.
//  3. open registers with t.Cleanup whatever it started; the suite cancels
//     its watches before those cleanups run.
//
// The suite runs its subtests sequentially (they may share one server
// between open calls), and asserts only behaviour documented on
// kvdb.Broker.
//
// WatchesCreatedDuringWrites holds a store to the watch contract while
// watches are created, read and cancelled during writes: every event from
// the start revision, in order, exactly once, and never a silent watch.
// It runs DefaultWatchRounds rounds (a few seconds); EnvWatchRounds
// (KVDBTEST_WATCH_ROUNDS) sets more for a long hunt, with -run
// 'TestContract/WatchesCreatedDuringWrites' to run that case alone. The
// suite holds no state between calls: each case owns what it creates.
package kvdbtest
