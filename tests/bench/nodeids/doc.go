// Package nodeids measures node ID claims: nodesync clients claiming
// their node IDs from one etcd. Figures are reported, never asserted (the
// target is 5,000 IDs within 10 s); a duplicate ID, a client left without
// one, or an etcd record that names another node fails the benchmark.
//
// What runs: the real claim of plugins/nodesync. It is reachable only
// through the plugin (its first DB resync claims), so each client is a
// nodesync.Plugin built as the plugin's own tests build it: a fixed node
// name, Presence and DB on its own etcd plugin (one client connection per
// node, etcd.conf defaults), no LocalDB, and an event loop that hands back
// the ClaimRetry nodesync pushes when etcd did not answer (run as the
// controller would). A claim that gives up (ErrClaimGaveUp after
// DefaultMaxClaimAttempts transactions) is run again at once, as a
// restarted agent would, and counted. Conflicts, attempts and listings
// are what nodesync logs with each "node ID claimed" line.
//
// The etcd server is the embedded one of infra/kvdb/etcd (etcdtest: the
// embedded server's code, in this process, on 127.0.0.1, without fsync):
// the clients are in-process goroutines and the claim is latency bound, so
// a separate Debian etcd would add nothing but a process hop (it is not
// installed here).
//
// Timed: from releasing every client at once to the last ID. Not timed:
// starting etcd and building and closing the clients. Each op is one
// round on a fresh etcd; there is no warm-up.
//
// Sizes (BenchmarkNodeIDs):
//
//   - clients=5000/concurrency=4: all 5,000 clients are released
//     together but at most 4 claim at a time (a client holds its slot
//     until it has its ID), as a rolling start would. Real nodes start at
//     once, but with the claim as it is that does not finish: at 1,000
//     clients at once it took 4 minutes with 2,836 claims giving up
//     (1,000 at 20 at a time: 9.5 s; 1 at a time: 3.2 s). Each listing of
//     allocatedIDs/ decodes every record, so 5,000 claims cost O(n²)
//     decodes even one at a time; 4 keeps the run near 2 minutes while
//     still showing the CAS conflicts of claims that overlap;
//   - clients=200/concurrency=200: all at once, the largest herd that
//     finishes in seconds: every client tries the same smallest free ID,
//     so most transactions are lost, and some claims give up.
//
// A plain `go test` runs TestClientsClaimDistinctIDs (40 clients at once,
// under a second). Recommended run (about two and a half minutes on 2
// cores):
//
//	go test -run '^$' -bench . -benchtime 1x -count 1 -timeout 15m ./nodeids/
//
// Owners: each client belongs to its goroutine during the round; the
// counters of the log handler are atomics; the benchmark goroutine reads
// the results after every client has returned.
package nodeids
