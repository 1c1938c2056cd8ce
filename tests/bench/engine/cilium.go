package engine

import (
	"fmt"
	"net/netip"

	"github.com/cilium/cilium/pkg/ipam/service/ipallocator"
)

// ciliumEngine is Cilium's service IP allocator, a Range over a big.Int
// bitmap: AllocateNext starts at a random offset and scans bit by bit.
type ciliumEngine struct {
	r    *ipallocator.Range
	held []netip.Addr
}

// ciliumNA: RangeSize caps an IPv6 range at 65536 addresses, of which
// NewCIDRRange hands out all but the first and the last.
func ciliumNA(s shape, n int) string {
	if limit := ipallocator.RangeSize(s.prefix) - 2; int64(n) > limit {
		return fmt.Sprintf("n/a: cilium's ipallocator caps an IPv6 range at 65536 addresses (%d allocatable; RangeSize in pkg/ipam/service/ipallocator/allocator.go, cilium v1.20.2: the range is one uncompressed big.Int bitmap), so it cannot hold %d", limit, n)
	}
	return ""
}

func openCilium(s shape, slots int) (engine, error) {
	return &ciliumEngine{r: ipallocator.NewCIDRRange(s.prefix), held: make([]netip.Addr, slots)}, nil
}

func (e *ciliumEngine) take(slot int, a netip.Addr) error {
	e.held[slot] = a
	return e.r.Allocate(a)
}

func (e *ciliumEngine) allocate(slot int) (netip.Addr, error) {
	a, err := e.r.AllocateNext()
	e.held[slot] = a
	return a, err
}

// release: Range.Release returns nothing (releasing a free address is a
// no-op); TestEngines catches a release that frees nothing by running the
// pool out.
func (e *ciliumEngine) release(slot int) error {
	e.r.Release(e.held[slot])
	return nil
}

func buildCilium(s shape, addrs []netip.Addr, _ *keySet) (any, error) {
	r := ipallocator.NewCIDRRange(s.prefix)
	for _, a := range addrs {
		if err := r.Allocate(a); err != nil {
			return nil, err
		}
	}
	return r, nil
}
