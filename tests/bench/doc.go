// Package bench holds the side-by-side benchmarks of the agent against its
// peers (Cilium, Kubernetes, host-local) and the program that runs them and
// writes BENCHMARKS.md. It is a module of its own so that the peers' code
// stays out of the agent's go.mod. Run it with `make bench`.
package bench
