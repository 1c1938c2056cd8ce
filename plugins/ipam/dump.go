package ipam

import (
	"cmp"
	"fmt"
	"net"
	"slices"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/ipam/localroutes"
)

// Dump maps every allocated address to its owner, one map per family,
// and gives a status one-liner (see keeper.Keeper.Dump).
func (p *Plugin) Dump() (allocv4, allocv6 map[string]string, status string) { return p.keeper.Dump() }

// DebugStatus is the status one-liner and one line per allocated
// address ("<ip>\t<owner>"), in address order per family.
func (p *Plugin) DebugStatus() string { return debugStatusOf(p.Dump()) }

// IPv4Allocator is the allocator of the IPv4 addresses (ErrIPv4Disabled
// from every call on a node without an IPv4 pod subnet).
func (p *Plugin) IPv4Allocator() Allocator { return &familyAllocator{p: p, family: IPv4} }

// IPv6Allocator is the allocator of the IPv6 addresses.
func (p *Plugin) IPv6Allocator() Allocator { return &familyAllocator{p: p, family: IPv6} }

// ReserveLocalRoutes excludes the addresses of this node's pod subnets
// that the host's routes claim (read over netlink in the agent's network
// namespace; see package localroutes): a pod never gets an address that
// collides with a local route. The exclusions are kept for every later
// resync.
func (p *Plugin) ReserveLocalRoutes() {
	st := p.st.Load()
	if st == nil {
		p.Log.Warn("ReserveLocalRoutes: no pod subnet yet", "reason", p.notReady())
		return
	}
	p.exclude(p.localRouteExclusions(st)...)
}

// localRouteExclusions reads the local routes inside the pod subnets.
func (p *Plugin) localRouteExclusions(st *addressing.State) []keeper.Exclusion {
	var out []keeper.Exclusion
	for _, f := range st.Families() {
		routes, err := localroutes.Overlaps(f.PodThis, localroutes.Options{})
		if err != nil {
			p.Log.Warn("reading the local routes failed; none excluded", "pod-subnet", f.PodThis.String(), "error", err)
			continue
		}
		for _, r := range routes {
			out = append(out, keeper.Exclusion{Prefix: r.Prefix, Owner: "local route: " + r.String()})
		}
	}
	slices.SortFunc(out, func(a, b keeper.Exclusion) int { return cmp.Compare(a.Prefix.String(), b.Prefix.String()) })
	return out
}

// familyAllocator is the Allocator of one family.
type familyAllocator struct {
	p      *Plugin
	family Family
}

var _ Allocator = (*familyAllocator)(nil)

// check refuses an address of the other family: it is out of this
// family's range (ipalloc.ErrOutOfRange), as in Cilium's per-family Range.
func (f *familyAllocator) check(ip net.IP) error {
	if DeriveFamily(ip) != f.family {
		return fmt.Errorf("address %s is not %s: %w", ip, f.family, ipalloc.ErrOutOfRange)
	}
	return nil
}

// Allocate implements Allocator.
func (f *familyAllocator) Allocate(ip net.IP, owner string) (*AllocationResult, error) {
	if err := f.check(ip); err != nil {
		return nil, err
	}
	return f.p.allocateIP(ip, owner, 0)
}

// Release implements Allocator: it releases the allocation holding ip.
func (f *familyAllocator) Release(ip net.IP) error {
	if err := f.check(ip); err != nil {
		return err
	}
	return f.p.ReleaseIP(ip)
}

// AllocateNext implements Allocator.
func (f *familyAllocator) AllocateNext(owner string) (*AllocationResult, error) {
	return f.p.AllocateNextFamily(f.family, owner)
}

// Dump implements Allocator.
func (f *familyAllocator) Dump() (map[string]string, string) {
	v4, v6, status := f.p.Dump()
	if f.family == IPv4 {
		return v4, status
	}
	return v6, status
}
