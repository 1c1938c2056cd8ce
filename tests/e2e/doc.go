// Package e2e runs the whole system as processes on one machine and
// checks what a cluster operator would: a real kube-apiserver and its etcd
// (tests/kubeenv), the Contiv etcd, contiv-ksr replicas and contiv-agent
// processes (tests/cluster), all on loopback. The package holds only
// tests.
//
// Each top-level test is one scenario: it owns its own API server,
// Contiv etcd and processes (killed at cleanup), so the scenarios run in
// parallel and share nothing. Within a scenario, the test goroutine alone
// drives the API and reads the agents' REST and etcd.
//
// Caller duties: run `make kube-bins` first (`make test` does); `go test
// ./tests/e2e/` builds contiv-agent and contiv-ksr itself (testenv.Main).
package e2e
