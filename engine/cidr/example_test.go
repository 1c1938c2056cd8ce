package cidr_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/engine/cidr"
)

// A node's pod subnet: node ID 5 of 10.1.0.0/16 cut into /24s, its gateway
// (offset 1) and its last address; and back from a pod IP to the node.
func Example() {
	cluster := netip.MustParsePrefix("10.1.0.0/16")
	node, _ := cidr.Subnet(cluster, 24, 5)
	gw, _ := cidr.Addr(node, 1)
	id, _ := cidr.SubnetIndex(cluster, 24, netip.MustParseAddr("10.1.5.77"))
	fmt.Println(node, gw, cidr.Last(node), id)
	// Output: 10.1.5.0/24 10.1.5.1 10.1.5.255 5
}

func ExampleSubnet() {
	v6, _ := cidr.Subnet(netip.MustParsePrefix("fe10::/64"), 119, 257)
	_, err := cidr.Subnet(netip.MustParsePrefix("10.0.0.0/8"), 16, 256)
	fmt.Println(v6)
	fmt.Println(err, errors.Is(err, cidr.ErrOutOfRange))
	// Output:
	// fe10::2:200/119
	// subnet /16 number 256 of 10.0.0.0/8: it has 256 of them: out of range true
}

func ExampleOffset() {
	p := netip.MustParsePrefix("fd00::/48")
	off, _ := cidr.Offset(p, netip.MustParseAddr("fd00::1:0"))
	_, err := cidr.Offset(netip.MustParsePrefix("::/0"), netip.MustParseAddr("1::"))
	fmt.Println(off, errors.Is(err, cidr.ErrOverflow))
	// Output: 65536 true
}

func ExampleAdd() {
	a, _ := cidr.Add(netip.MustParseAddr("10.1.5.255"), 2)
	_, err := cidr.Add(netip.MustParseAddr("255.255.255.255"), 1)
	fmt.Println(a, errors.Is(err, cidr.ErrOverflow))
	// Output: 10.1.6.1 true
}

// A Block converts offsets of one prefix without errors or checks repeated
// per call: the allocator's hot path.
func ExampleBlock() {
	b := cidr.NewBlock(netip.MustParsePrefix("1.2.128.8/29"))
	off, ok := b.Offset(netip.MustParseAddr("::ffff:1.2.128.13")) // IPv4-mapped counts as IPv4
	fmt.Println(b.Addr(2), off, ok, b.MaxOffset(), b.Addr(8).IsValid())
	// Output: 1.2.128.10 5 true 7 false
}
