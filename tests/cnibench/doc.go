// Package cnibench holds the CNI benchmarks of the agent (go test -bench;
// figures are reported, not asserted):
//
//   - BenchmarkGRPCAdd/callers={1,16,64}: durable Adds through the real
//     agent's gRPC socket (tests/testenv), distinct keys, one connection
//     per caller; adds/s and p50/p99 latency;
//   - BenchmarkCNIToolAdd/existing={0,1000,4000}/plugin={contiv-cni,
//     host-local}: one cnitool exec per ADD, as a runtime that execs the
//     plugin pays, on top of that many allocations already held; p50/p99,
//     and the same of the floor plugin run right after each ADD (same
//     load), and the p50 over the floor;
//   - BenchmarkCNIToolFloor: cnitool running a plugin that only prints a
//     fixed result (testdata/floor): the exec floor the others are
//     compared with.
//
// A plain `go test` runs only the unit test of the percentile; the agent
// and contiv-cni are built (testenv.Main) only when -bench is given. The
// cnitool benchmarks need `make test-deps` (./bin/cnitool, Debian's
// host-local in /usr/lib/cni). README.md has the commands.
//
// Owners: each benchmark's state (agent, tool environment, lease
// directory) belongs to its goroutine; the concurrent callers of
// BenchmarkGRPCAdd share only an atomic counter and write their latencies
// into their own slices, read after they have returned.
package cnibench
