// Package nodeids measures node ID claims: nodesync clients claiming
// their node IDs from one etcd, all at once. Figures are reported, never
// asserted (the target is 5,000 IDs within 10 s); a duplicate ID, a client
// left without one, or an etcd record that names another node fails the
// benchmark.
//
// What runs: the real claim of plugins/nodesync. It is reachable only
// through the plugin (its first DB resync claims), so each client is a
// nodesync.Plugin built as the plugin's own tests build it: a fixed node
// name, Presence and DB on an etcd plugin (etcd.conf defaults), no
// LocalDB, and an event loop that hands back the ClaimRetry nodesync
// pushes when etcd did not answer (run as the controller would). A claim
// that gives up (ErrClaimGaveUp after DefaultMaxClaimAttempts
// transactions) is run again at once, as a restarted agent would, and
// counted in "gave-up", which must stay 0. Conflicts, attempts, listings
// and keys-listed (the keys those listings returned) are what nodesync
// logs with each "node ID claimed" line;
// "max-id" is the highest ID claimed (compactness: at most n - 1 +
// nodesync.MaxClaimWindow, asserted by the test).
//
// Connections: per-conn clients share one etcd plugin (one gRPC client
// connection). 5,000 connections in one process on 2 cores spend the run
// on 5,000 HTTP/2 transports, keep-alives and health probes, and their
// requests time out (about 20,000 ClaimRetry and 160 s for the herd). A
// shared plugin is still fair: every client sends its own requests (its
// own lease and presence key, listings and transactions), which the
// server serves exactly as from separate connections; the etcd plugin's
// Broker and PresenceStore are safe for concurrent use and give each
// caller its own lease. Only the connection's per-process overhead is
// shared, as it would be spread over 5,000 machines in a cluster.
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
// Rows (BenchmarkNodeIDs), every client released at the same moment
// (concurrency = clients: a herd, as a cluster that starts all its nodes):
//
//   - clients=5000/per-conn=50: the issue's figure, "5,000 nodesync
//     clients claiming IDs from one etcd: total time and conflicts";
//   - clients=1000/per-conn=1 and clients=200/per-conn=1: smaller herds,
//     one connection per client as real agents have. Before the claim
//     spread its candidates (every client tried the same smallest free
//     ID), 200 at once took 2.5-3.7 s with about 9,000 conflicts and
//     24-26 claims that gave up, and 1,000 at once 4 minutes with 2,836.
//
// A new node lists allocatedIDs/ once (no index key names it yet, and a
// record of an agent that predates the index can be found only so); a
// lost race does not list again before 8 losses, so a herd costs about
// one listing per node, most of them early, while few records exist. A
// restart finds its record by its index without listing. The figures
// swing with the machine's load.
//
// A plain `go test` runs TestClientsClaimDistinctIDs (40 clients at once,
// one connection each and 8 per connection, under a second). Recommended
// run (about a minute on 2 cores):
//
//	go test -run '^$' -bench . -benchtime 1x -count 1 -timeout 15m ./nodeids/
//
// Owners: each client belongs to its goroutine during the round; the
// counters of the log handler are atomics; the benchmark goroutine reads
// the results after every client has returned.
package nodeids
