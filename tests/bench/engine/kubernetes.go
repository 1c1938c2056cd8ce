package engine

import (
	"fmt"
	"net"
	"net/netip"

	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam/cidrset"
	svcipallocator "k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
)

// ipNet is p as a net.IPNet, with a 4-byte IP for IPv4 (cidrset reads the
// first four bytes of an IPv4 cluster CIDR).
func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// addrOf converts an address the peers return as a net.IP.
func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// cidrSetEngine is Kubernetes' node CIDR allocator with one-address node
// CIDRs (/32): a big.Int bitmap searched next-fit bit by bit, under a mutex,
// with Prometheus metrics updated on every call (they are part of the
// code path a user gets).
type cidrSetEngine struct {
	s    *cidrset.CidrSet
	mask net.IPMask
	held []*net.IPNet
}

// cidrSetMaxDiff is cidrset's clusterSubnetMaxDiff (unexported): for an
// IPv6 cluster CIDR the node mask may be at most 16 bits longer. The
// check applies to IPv6 only; TestNotApplicableLimits checks both.
const cidrSetMaxDiff = 16

func cidrSetNA(s shape, _ int) string {
	if diff := 128 - s.prefix.Bits(); s.is6() && diff > cidrSetMaxDiff {
		return fmt.Sprintf("n/a: k8s cidrset refuses an IPv6 node mask more than 16 bits longer than the cluster mask (ErrCIDRSetSubNetTooBig, clusterSubnetMaxDiff in pkg/controller/nodeipam/ipam/cidrset/cidr_set.go, kubernetes v1.36.3, issue 44918: an uncompressed big.Int bitmap); a /%d in /128s is %d bits", s.prefix.Bits(), diff)
	}
	return ""
}

// newCIDRSet returns a cidrset of the one-address CIDRs of s. With bounds,
// the first and the last are occupied, so that it hands out the same
// window as the others (BenchmarkMemory leaves them out: occupying the
// last address grows the big.Int to the size of the whole prefix).
func newCIDRSet(s shape, bounds bool) (*cidrset.CidrSet, net.IPMask, error) {
	bitLen := s.prefix.Addr().BitLen()
	cs, err := cidrset.NewCIDRSet(ipNet(s.prefix), bitLen)
	if err != nil {
		return nil, nil, err
	}
	mask := net.CIDRMask(bitLen, bitLen)
	if !bounds {
		return cs, mask, nil
	}
	for _, a := range []netip.Addr{s.prefix.Addr(), lastAddr(s.prefix)} {
		if err := cs.Occupy(&net.IPNet{IP: a.AsSlice(), Mask: mask}); err != nil {
			return nil, nil, err
		}
	}
	return cs, mask, nil
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func openCIDRSet(s shape, slots int) (engine, error) {
	cs, mask, err := newCIDRSet(s, true)
	if err != nil {
		return nil, err
	}
	return &cidrSetEngine{s: cs, mask: mask, held: make([]*net.IPNet, slots)}, nil
}

func (e *cidrSetEngine) take(slot int, a netip.Addr) error {
	c := &net.IPNet{IP: a.AsSlice(), Mask: e.mask}
	e.held[slot] = c
	return e.s.Occupy(c)
}

func (e *cidrSetEngine) allocate(slot int) (netip.Addr, error) {
	c, err := e.s.AllocateNext()
	if err != nil {
		return netip.Addr{}, err
	}
	e.held[slot] = c
	return addrOf(c.IP), nil
}

func (e *cidrSetEngine) release(slot int) error { return e.s.Release(e.held[slot]) }

func buildCIDRSet(s shape, addrs []netip.Addr, _ *keySet) (any, error) {
	cs, mask, err := newCIDRSet(s, false)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := cs.Occupy(&net.IPNet{IP: a.AsSlice(), Mask: mask}); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// serviceEngine is Kubernetes' service ClusterIP allocator in its in-memory
// bitmap form (ipallocator.NewInMemory, the allocator of the
// non-MultiCIDRServiceAllocator path): a big.Int bitmap, AllocateNext from
// a random offset in the upper part of the range, bit by bit, under a
// mutex; metrics are off unless EnableMetrics is called.
type serviceEngine struct {
	r    *svcipallocator.Range
	held []net.IP
}

// serviceMax is the cap New puts on an IPv6 range.
const serviceMax = 65536

func serviceNA(s shape, n int) string {
	if limit := serviceMax - 1; s.is6() && n > limit {
		return fmt.Sprintf("n/a: the k8s service allocator caps an IPv6 range at 65536 addresses (%d allocatable; New in pkg/registry/core/service/ipallocator/bitmap.go, kubernetes v1.36.3: 'the allocator keeps a bitmap of that size'), so it cannot hold %d", limit, n)
	}
	return ""
}

func openService(s shape, slots int) (engine, error) {
	r, err := svcipallocator.NewInMemory(ipNet(s.prefix))
	if err != nil {
		return nil, err
	}
	return &serviceEngine{r: r, held: make([]net.IP, slots)}, nil
}

func (e *serviceEngine) take(slot int, a netip.Addr) error {
	ip := net.IP(a.AsSlice())
	e.held[slot] = ip
	return e.r.Allocate(ip)
}

func (e *serviceEngine) allocate(slot int) (netip.Addr, error) {
	ip, err := e.r.AllocateNext()
	e.held[slot] = ip
	return addrOf(ip), err
}

func (e *serviceEngine) release(slot int) error { return e.r.Release(e.held[slot]) }

func buildService(s shape, addrs []netip.Addr, _ *keySet) (any, error) {
	r, err := svcipallocator.NewInMemory(ipNet(s.prefix))
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := r.Allocate(net.IP(a.AsSlice())); err != nil {
			return nil, err
		}
	}
	return r, nil
}
