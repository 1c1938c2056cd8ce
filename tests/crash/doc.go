// Package crash is the CNI crash test of the agent: 16 concurrent clients
// call Add and Delete over the agent's gRPC socket (the RemoteCNI service
// of plugins/podmanager/cni) while the agent is killed with SIGKILL at
// random moments and restarted on the same directory (tests/testenv).
// After every restart the agent's allocations (REST
// /contiv/v1/ipam/allocations) are compared with what the clients were
// told:
//
//   - no address is held by two keys;
//   - every acknowledged Add not followed by an acknowledged Delete is
//     held by its key with the acknowledged address (and for its pod);
//   - every acknowledged Delete holds nothing, and so does every key an
//     acknowledged GC did not list;
//   - a key whose last call has an unknown outcome (failed, or cut by the
//     kill) may hold an address or nothing, but a key that held an
//     address before such a call holds that one or nothing;
//   - no key holds an address that no client ever asked for;
//   - a repeated Add of a held key returns its address;
//   - after the restart, keys of unknown outcome are settled by a Delete
//     each or (every second cycle) by one GC listing the held keys, both
//     acknowledged;
//   - the agent's log has no panic or fatal line.
//
// TestReservationRestart (reservation_test.go) kills the agent with
// expiring CNI reservations in its store (ipam.conf cniReservationTimeout,
// Adds with confirms that are not yet confirmed): restarted before the
// deadline, an unconfirmed allocation is still held with its addresses and
// its stored deadline, can still be confirmed, and is released at the
// deadline; one whose deadline passed while the agent was down is
// released once it is ready; confirmed allocations survive every kill.
//
// TestCrashWithStalledCommits runs the cycles on a disk that stalls (the
// agent built with the faults tag, bolt.StallEnv set): some commits stall
// longer than storeTimeout and the clients' deadline, so writes queued
// behind them are withdrawn and those they have taken land after their
// caller gave up; the same checks hold, and the test requires that
// stalls, withdrawn writes and late applies were seen.
//
// The package itself holds only the ledger and its checker (ledger.go);
// the clients and the test live in the _test.go files. README.md says how
// to run it (make crash, CRASH_CYCLES, CRASH_SEED).
//
// Owners: a Ledger belongs to the client that records into it; clients
// run on their own goroutines during a cycle and are read by the test
// goroutine only after every client of the cycle has returned (a
// WaitGroup orders the two). Check reads ledgers and builds its own maps;
// it keeps nothing.
package crash
