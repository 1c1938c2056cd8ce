package engine

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"testing"
)

// floorEngine is the least a hashed key index costs in the contiv-keyed
// cell: the keyed adapter's keys and slots over the unkeyed pool, each op
// hashing the key it releases and the key it assigns and comparing the
// released key with its stored copy (what the index must do to find a key
// in any hash table), with no table. BenchmarkKeyedFloor minus the contiv
// cell is what the keys cost the harness and the hash; contiv-keyed minus
// BenchmarkKeyedFloor is what ipalloc.Keyed's index costs beyond that.
type floorEngine struct {
	*keyedEngine
	pool *contivEngine
	seed maphash.Seed
	sum  uint64 // keeps the hashes alive
}

func openFloor(s shape, slots int) (engine, error) {
	ke, err := openKeyed(s, slots)
	if err != nil {
		return nil, err
	}
	pe, err := openContiv(s, slots)
	if err != nil {
		return nil, err
	}
	return &floorEngine{keyedEngine: ke.(*keyedEngine), pool: pe.(*contivEngine), seed: maphash.MakeSeed()}, nil
}

func (e *floorEngine) take(slot int, a netip.Addr) error {
	e.held[slot] = e.fresh()
	return e.pool.take(slot, a)
}

func (e *floorEngine) allocate(slot int) (netip.Addr, error) {
	i := e.fresh()
	e.held[slot] = i
	e.sum += maphash.Comparable(e.seed, e.keys.stored[i])
	return e.pool.allocate(slot)
}

func (e *floorEngine) release(slot int) error {
	i := e.held[slot]
	key := e.keys.request[i]
	e.sum += maphash.Comparable(e.seed, key)
	if key != e.keys.stored[i] {
		return errNotHeld
	}
	t := e.head + e.nfree
	if t >= len(e.free) {
		t -= len(e.free)
	}
	e.free[t] = i
	e.nfree++
	return e.pool.release(slot)
}

var floorImpl = impl{name: "key-floor", na: always, open: openFloor}

// BenchmarkKeyedFloor runs the floor engine on the IPv4 cells of
// BenchmarkEngine at 99 % and the /64, named like them with
// impl=key-floor.
func BenchmarkKeyedFloor(b *testing.B) {
	for _, s := range []shape{v4s24, v4s16, v4s12} {
		n := s.size() * 99 / 100
		b.Run(fmt.Sprintf("pool=%s/fill=99/impl=%s", s.name, floorImpl.name), func(b *testing.B) {
			churn(b, floorImpl, s, n, func() []netip.Addr { return s.scattered(n) })
		})
	}
	const n = 1 << 20
	b.Run(fmt.Sprintf("pool=%s/inuse=%d/impl=%s", v6s64.name, n, floorImpl.name), func(b *testing.B) {
		churn(b, floorImpl, v6s64, n, func() []netip.Addr { return v6s64.firstN(n) })
	})
}

// TestKeyedFloor churns the floor engine like every adapter in
// TestEngines: its keys and slots must stay consistent for its figure to
// mean anything.
func TestKeyedFloor(t *testing.T) {
	t.Parallel()
	v4s26 := shape{name: "v4-26", prefix: netip.MustParsePrefix("10.9.9.64/26")}
	testChurn(t, floorImpl, v4s26, v4s26.size()-3, v4s26.scattered(v4s26.size()-3))
}
