package engine

import (
	"errors"
	"math/rand/v2"
	"net/netip"
)

// Errors of the adapters whose implementation reports a failure as false.
var (
	errFull    = errors.New("no free address")
	errTaken   = errors.New("address already taken")
	errNotHeld = errors.New("slot holds no allocated address")
)

// engine is the one adapter every implementation sits behind. An adapter
// holds the addresses it hands out in numbered slots, in the
// implementation's own type (so no conversion is timed on release), and is
// built for a fixed number of slots. It is not safe for concurrent use.
type engine interface {
	// take claims the address a and holds it in slot: the setup path,
	// like restoring an allocation known from before a restart.
	take(slot int, a netip.Addr) error
	// allocate hands out the next free address and holds it in slot,
	// whose previous address must have been released.
	allocate(slot int) (netip.Addr, error)
	// release frees the address held in slot.
	release(slot int) error
}

// shape is a pool of the benchmarks. The window, the addresses every
// implementation hands out, is the prefix without its first address (the
// network address, or the IPv6 subnet-router anycast) and, for IPv4,
// without its last (the broadcast address): what the peers leave out by
// themselves.
type shape struct {
	name   string // as in the benchmark names: v4-24, v6-64
	prefix netip.Prefix
}

var (
	v4s24 = shape{name: "v4-24", prefix: netip.MustParsePrefix("10.1.2.0/24")}
	v4s16 = shape{name: "v4-16", prefix: netip.MustParsePrefix("10.1.0.0/16")}
	v4s12 = shape{name: "v4-12", prefix: netip.MustParsePrefix("10.16.0.0/12")}
	v6s64 = shape{name: "v6-64", prefix: netip.MustParsePrefix("fd00:1:2:3::/64")}
)

func (s shape) is6() bool { return s.prefix.Addr().Is6() }

// first is the first address of the window.
func (s shape) first() netip.Addr { return s.prefix.Addr().Next() }

// size is the number of addresses in the window of an IPv4 shape.
func (s shape) size() int { return 1<<(32-s.prefix.Bits()) - 2 }

// firstN returns the first n addresses of the window.
func (s shape) firstN(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	a := s.first()
	for i := range out {
		out[i], a = a, a.Next()
	}
	return out
}

// scattered returns n addresses of the window of an IPv4 shape, drawn at
// random (the same ones for every implementation): the holes a pool has
// after a while of churn.
func (s shape) scattered(n int) []netip.Addr {
	all := s.firstN(s.size())
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:n:n]
}

// impl is an implementation under benchmark.
type impl struct {
	name string
	// na says why the implementation cannot represent the shape with n
	// addresses in use, and where the limit comes from; "" if it can.
	na func(s shape, n int) string
	// open returns an empty pool of s behind the adapter, with slots
	// slots.
	open func(s shape, slots int) (engine, error)
	// build returns a bare pool of s holding addrs, for BenchmarkMemory.
	// Only the keyed pool uses keys: keys.stored[i] holds addrs[i].
	build func(s shape, addrs []netip.Addr, keys *keySet) (any, error)
}

// impls are the implementations, ours first. Their adapters are in
// contiv.go, keyed.go, peers.go and flat.go.
var impls = []impl{
	{name: "contiv", na: always, open: openContiv, build: buildContiv},
	{name: "contiv-keyed", na: always, open: openKeyed, build: buildKeyed},
	{name: "cilium", na: ciliumNA, open: openCilium, build: buildCilium},
	{name: "k8s-cidrset", na: cidrSetNA, open: openCIDRSet, build: buildCIDRSet},
	{name: "k8s-service", na: serviceNA, open: openService, build: buildService},
	{name: "bitmap", na: bitmapNA, open: openFlat, build: buildFlat},
}

func always(shape, int) string { return "" }

// randomSlots returns precomputed random slot numbers below n, a power of
// two of them, so that the timed loop draws no random numbers.
func randomSlots(n int) []int {
	rng := rand.New(rand.NewPCG(5, 6))
	idx := make([]int, 1<<16)
	for i := range idx {
		idx[i] = rng.IntN(n)
	}
	return idx
}
