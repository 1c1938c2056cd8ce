// Package engine benchmarks the allocator engine of the IPAM plugin
// (engine/ipalloc, unkeyed and keyed) against the address allocators
// of its peers, imported as libraries: Cilium's service IP allocator,
// Kubernetes' node CIDR set and service IP allocator, and a flat bitmap
// written here as the yardstick of what a next-fit search can cost at
// least.
//
// Every implementation sits behind the same small adapter (engine): take
// an address at setup, allocate the next one, release one. BenchmarkEngine
// churns a pool at a constant fill through it; BenchmarkMemory measures the
// heap a pool holds; TestEngines drives every adapter through a short churn
// so that a bug in an adapter cannot hide in a benchmark figure. README.md
// lists the cells, the peers' versions, the cells a peer cannot represent
// and the command lines.
package engine
