// Package resync measures how the agent rebuilds IPAM after a restart on
// a big Kubernetes state: 100,000 pods over 5,000 nodes (and their 4,999
// other node ID records), 250 of the pods on this node, whose addresses
// the agent allocated before the restart and keeps in bolt. Figures are
// reported, never asserted; the targets are a start to ready within
// 200 ms and a peak RSS within 64 MiB, within 20 % of a small state's
// (1,000 pods over 4 nodes), and an idle RSS within 32 MiB.
//
// The state is written with the real models (plugins/ksr/model: node,
// pod, vppnode) and keys, encoded by codec.Marshal as contiv-ksr writes
// them; a pod has two labels and one container with one port. The pods
// are in contiv-ksr's per-node layout (pod.NodeKey), except in the
// restart's layout=cluster case (pod.Key, the agent's controller.conf
// podLayout: cluster): the before and after of per-node state.
//
// In process, BenchmarkResync:
//
//   - stage=decode: the DB watcher's conversion of the 100,000 listed
//     values into the controller's Kubernetes state (dbresources.Decode
//     per key, what dbwatcher's decodeAll does);
//   - stage=watcher: the DB watcher itself, Start to the DB resync it
//     pushes, with an agent's prefixes (dbresources.WatchPrefixes: its
//     node's pods, every node's records, three keys): the Lists through
//     the etcd plugin from an etcd
//     server in this process (infra/kvdb/etcd/etcdtest: the embedded
//     server's code, without fsync), decode, and the bolt mirror, up to
//     date as at a restart (the first, untimed op fills it). B/op
//     includes what the etcd server allocates to answer;
//   - stage=ipam: the IPAM plugin's first DB resync after a restart: a
//     fresh plugin (real contivconf, real bolt file holding the 250
//     attachment records made through IPAM's AddPod handler, nodesync
//     replaced by the ID it claimed) is started untimed; only Resync is
//     timed, then the restored addresses are checked.
//
// Each reports ns/op, B/op, allocs/op and "ms" (the mean time per op).
//
// End to end, BenchmarkAgentRestart/etcd=external runs the real agent
// binary (built by tests/testenv) on an etcd server in this process, on
// loopback. Set-up, untimed: the nodes are written (128 keys per
// transaction), a first run makes the 250 allocations through the CNI
// gRPC socket (K8S_POD_NAME/NAMESPACE set), it is stopped (SIGINT), the
// pods are written with those addresses, and one more run mirrors the
// state into bolt: its start-to-ready time and peak RSS are
// "cold-mirror-ms" and "cold-MiB". Each timed op is then one restart:
// exec to /readiness answering 200 (polled every 2 ms once the "agent
// ready" line names the REST port), after which the 250 allocations are
// checked over REST and the agent is stopped (untimed). Reported: "ms"
// (the mean start to ready), "idle-MiB" (VmRSS 5 s after one more,
// untimed start), "list-ms" (the DB watcher's remote resync:
// List, decode, mirror, as its "remote resync pushed" log line says),
// "resync-ms" (the processing of the DB Resync event by every handler,
// from GET /controller/event-history), and "MiB" (the largest VmHWM of
// /proc/<pid>/status over the runs, read once ready).
//
// A plain `go test` runs TestRestartRestoresLocalPods only (in process, a
// tiny state); the agent is built (testenv.Main) only when -bench is
// given. Recommended run (about a minute and a half on 2 cores):
//
//	go test -run '^$' -bench . -benchtime 3x -count 1 ./resync/
//
// Owners: every benchmark's state belongs to its goroutine; the agent's
// log reader goroutine writes only the last record of each message (under
// a mutex) and the ready and exit channels.
package resync
