// Package cni is the CNI conformance suite of the agent: it runs the real
// contiv-agent (tests/testenv) and drives the real contiv-cni binary the
// way container runtimes do, through libcni (the library containerd and
// CRI-O use) and through the cnitool binary, in both ways contiv-cni is
// used (the network plugin of a conflist, and the IPAM plugin of
// Debian's ptp in a network namespace the suite creates, ptp itself run
// in a "host" namespace the suite creates too), and it runs Debian's
// host-local IPAM plugin on the same configs as an oracle. Single-stack
// and dual-stack agents (ipamConfig.dualStack) are both covered, and the
// expiring CNI reservations (ipam.conf cniReservationTimeout) in real
// time, with the agent's gRPC API called directly where the test must
// stop where a dead contiv-cni stops (after Add, before Confirm). The
// package holds only tests; README.md lists what each test pins and
// every intended difference from host-local.
//
// Owner: each top-level test owns the agents it starts, its network
// namespaces and its cache directories, and removes them in t.Cleanup;
// subtests of one top-level test run one after the other on its agent
// (they share its address pool), so there is no shared mutable state
// between goroutines.
//
// Caller duties: run as root (network namespaces, ptp), after
// `make test-deps` (bin/cnitool, Debian containernetworking-plugins in
// /usr/lib/cni, ping); `go test ./tests/cni/` builds contiv-agent and
// contiv-cni itself (testenv.Main). cnitool has no cache-dir option, so
// its section writes under /var/lib/cni/results with network names unique
// to the test process and removes exactly the files it created.
package cni
