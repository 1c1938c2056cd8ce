// Package startup measures how long the agent takes from exec to ready:
// BenchmarkStartToReady starts the real contiv-agent binary (built by
// tests/testenv) and times exec until GET /readiness answers 200.
//
//   - etcd=embedded: the agent runs its own embedded etcd (testenv's
//     etcd.conf: loopback ports the kernel chooses, data in the start's
//     directory); the target is 300 ms;
//   - etcd=external: the agent is a client of an etcd server started once
//     by the benchmark in this process (infra/kvdb/etcd/etcdtest: the
//     embedded server's code, on 127.0.0.1, without fsync; Debian's etcd
//     is not installed here). Each start uses a new node name, so each
//     claims a new node ID as a new node would.
//
// Each op is a fresh start: a new config and data directory (bolt, and
// the embedded etcd's data), the conf/ samples otherwise. What is timed:
// exec, then the agent's "agent ready" log line (it names the REST port
// the kernel chose), then GET /readiness every 2 ms (agentproc.PollPeriod)
// until it answers 200; the poll period bounds the error of a measure. The agent
// is then stopped with SIGINT, untimed. There is no warm-up beyond the
// build (testenv.Main) and the run the testing package makes with b.N=1
// is not made (b.Loop). Reported: ns/op and the nearest-rank "p50-ms" and
// "p99-ms" of the starts (with 20 starts, p99 is the slowest).
//
// A plain `go test` runs TestSetup only (the config of each mode, the
// readiness poll against a test server, the percentiles): the agent is
// built only when -bench is given. Recommended run (about a minute):
//
//	go test -run '^$' -bench . -benchtime 20x -count 1 ./startup/
//
// Owner: the benchmark goroutine owns every agent; the log reader
// goroutine of a run only writes its ready and exit channels and the last
// record of each message (under a mutex).
package startup
