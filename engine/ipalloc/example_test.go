package ipalloc_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/engine/ipalloc"
)

// A pod subnet: the network address and the gateway at the bottom, the NAT
// loopback and the broadcast address at the top are never handed out.
func Example() {
	p, err := ipalloc.New(ipalloc.Config{
		Prefix:      netip.MustParsePrefix("1.2.128.8/29"),
		ReserveLow:  2,
		ReserveHigh: 2,
	})
	if err != nil {
		panic(err)
	}
	a, _ := p.Allocate()
	b, _ := p.Allocate()
	_ = p.Release(b)
	c, _ := p.Allocate() // next-fit: b is not reused before the wrap
	fmt.Println(a, b, c, p.Used(), p.Size())
	_ = p.AllocateAddr(netip.MustParseAddr("1.2.128.13"))
	d, _ := p.Allocate() // wrapped around
	_, err = p.Allocate()
	fmt.Println(d, errors.Is(err, ipalloc.ErrPoolExhausted))
	// Output:
	// 1.2.128.10 1.2.128.11 1.2.128.12 2 4
	// 1.2.128.11 true
}

// Restore the assignments persisted before a restart, then the cursor, and
// go on assigning.
func ExampleKeyed() {
	type pod struct{ Namespace, Name string }
	k, err := ipalloc.NewKeyed[pod](ipalloc.Config{Prefix: netip.MustParsePrefix("fd00::/64"), ReserveLow: 2})
	if err != nil {
		panic(err)
	}
	if err := k.AssignAddr(pod{"default", "web"}, netip.MustParseAddr("fd00::7")); err != nil {
		panic(err)
	}
	if err := k.Pool().SetCursor(netip.MustParseAddr("fd00::7")); err != nil {
		panic(err)
	}
	a, existed, _ := k.Assign(pod{"default", "db"})
	fmt.Println(a, existed)
	a, existed, _ = k.Assign(pod{"default", "web"})
	fmt.Println(a, existed)
	k.Range(func(p pod, a netip.Addr) bool {
		fmt.Println(p.Name, a)
		return true
	})
	// Output:
	// fd00::8 false
	// fd00::7 true
	// web fd00::7
	// db fd00::8
}
