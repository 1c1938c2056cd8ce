// Package cni is the CNI conformance suite of the agent: it runs the real
// contiv-agent (tests/testenv) and drives the real contiv-cni binary the
// way container runtimes do, through libcni (the library containerd and
// CRI-O use) and through the cnitool binary, in both ways contiv-cni is
// used (the network plugin of a conflist, and the IPAM plugin of
// Debian's ptp in a network namespace the suite creates), and it runs
// Debian's host-local IPAM plugin on the same configs as an oracle. The
// package holds only tests; README.md lists every intended difference
// from host-local.
//
// Owner: each top-level test owns the agents it starts, its network
// namespaces and its cache directories, and removes them in t.Cleanup;
// subtests of one top-level test run one after the other on its agent
// (they share its address pool), so there is no shared mutable state
// between goroutines.
//
// Caller duties: run as root (network namespaces, ptp), after
// `make test-deps` (bin/cnitool, Debian containernetworking-plugins in
// /usr/lib/cni); `go test ./tests/cni/` builds contiv-agent and
// contiv-cni itself (testenv.Main). cnitool has no cache-dir option, so
// its section writes under /var/lib/cni/results with network names unique
// to the test process and removes exactly the files it created.
package cni
