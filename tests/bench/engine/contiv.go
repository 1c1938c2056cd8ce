package engine

import (
	"net/netip"

	"github.com/contiv-ipam/agent/engine/ipalloc"
)

// contivConfig is the window of s as an ipalloc.Config.
func contivConfig(s shape) ipalloc.Config {
	return ipalloc.Config{Prefix: s.prefix, ReserveLow: 1, ReserveHigh: 1}
}

// contivEngine is ipalloc.Pool through its netip.Addr API (Allocate,
// Release, AllocateAddr), as a caller without offsets uses it.
type contivEngine struct {
	p    *ipalloc.Pool
	held []netip.Addr
}

func openContiv(s shape, slots int) (engine, error) {
	p, err := ipalloc.New(contivConfig(s))
	if err != nil {
		return nil, err
	}
	return &contivEngine{p: p, held: make([]netip.Addr, slots)}, nil
}

func (e *contivEngine) take(slot int, a netip.Addr) error {
	e.held[slot] = a
	return e.p.AllocateAddr(a)
}

func (e *contivEngine) allocate(slot int) (netip.Addr, error) {
	a, err := e.p.Allocate()
	e.held[slot] = a
	return a, err
}

func (e *contivEngine) release(slot int) error { return e.p.Release(e.held[slot]) }

func buildContiv(s shape, addrs []netip.Addr, _ *keySet) (any, error) {
	p, err := ipalloc.New(contivConfig(s))
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := p.AllocateAddr(a); err != nil {
			return nil, err
		}
	}
	return p, nil
}
