// Package cluster runs a Contiv cluster on one machine as real processes
// on loopback, for the end-to-end tests (tests/e2e) and `make demo`
// (tests/demo): the Contiv etcd (the etcd server binary of
// kubeenv.AssetsDir()), contiv-ksr replicas that mirror a Kubernetes API
// server into it (the API server itself comes from kubeenv), and
// contiv-agent processes with distinct node names on that one etcd, each
// with its own config directory, bolt file, REST port and CNI socket.
// Ports are chosen by the kernel (port 0) and read back from each
// process's log; every file is under the cluster's directory.
//
// It needs no testing.T: Start, AddKSR, AddAgent, Stop and Kill return
// errors. The *T functions (StartT, AddKSRT, AddAgentT, ClientT,
// TestBins) are thin wrappers for tests that fail the test instead and
// kill the processes at cleanup.
//
// # Owners
//
//   - A Cluster and its slices (KSRs, Agents) belong to the goroutine that
//     started it; it is not safe for concurrent use.
//   - Each Proc has two goroutines: the reader writes the process's log
//     file and sends the ready line once; the waiter reaps the process and
//     records its exit error before it closes Done. Neither touches the
//     Cluster.
//   - Each process leads a process group of its own, so that a terminal's
//     Ctrl-C reaches only the program that started it, and signals
//     (SIGINT to stop, SIGKILL to kill) go to the whole group. The kernel
//     kills each child with SIGKILL if its parent dies first (Pdeathsig).
//
// # Caller duties
//
//  1. Build the binaries (testenv.Main in tests, `make build` for the demo)
//     and find them with BinsIn or TestBins; run `make kube-bins` for etcd.
//  2. Start a kube-apiserver (kubeenv) and pass its kubeconfig to Start.
//  3. Call Start, then AddKSR and AddAgent (each returns once the process
//     answers 200 on /readiness); stop everything with Stop (clean) or
//     Kill, which StartT does at cleanup. A process stopped or killed on
//     its own (Proc.Stop, Proc.Kill) is left alone by both.
package cluster
