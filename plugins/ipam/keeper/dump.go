package ipam

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/localroutes"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Dump maps every allocated address to its owner, one map per family,
// and gives a status one-liner: per family, the addresses held of those
// that can be handed out, the excluded and the reserved (expiring) ones.
// An owner is the owner name of an owner-keyed allocation, the pod
// ("namespace/name") of a pod-keyed one, and the pod and the attachment
// of a CNI allocation.
func (p *Plugin) Dump() (allocv4, allocv6 map[string]string, status string) {
	allocv4, allocv6 = map[string]string{}, map[string]string{}
	status = p.notReady().Error()
	p.keeper.read(func(t *table) {
		t.each(func(k allocKey, pod podmodel.ID, as addrs) bool {
			for _, a := range as.list() {
				if a.Is4() {
					allocv4[a.String()] = ownerName(k, pod)
				} else {
					allocv6[a.String()] = ownerName(k, pod)
				}
			}
			return true
		})
		status = t.status()
	})
	return allocv4, allocv6, status
}

// ownerName names the owner of an allocation in Dump.
func ownerName(k allocKey, pod podmodel.ID) string {
	switch {
	case k.ownerKeyed():
		return k.pod.Name
	case k.podKeyed():
		return pod.String()
	}
	return pod.String() + " " + k.att.String()
}

// status is the one-liner of Dump.
func (t *table) status() string {
	var parts []string
	for i, f := range t.st.Families() {
		if t.externalMode() {
			parts = append(parts, fmt.Sprintf("%s: %d from an external IPAM", f.PodThis, t.count(i)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d/%d allocated, %d excluded, %d cooling down", f.PodThis, t.count(i),
			t.size(i)-uint64(t.excludedCount(i)), t.excludedCount(i), t.coolingCount(i)))
	}
	return fmt.Sprintf("%s; %d reservations awaiting confirmation", strings.Join(parts, "; "), len(t.resv))
}

// DebugStatus is the status one-liner and one line per allocated
// address ("<ip>\t<owner>"), in address order per family.
func (p *Plugin) DebugStatus() string { return debugStatusOf(p.Dump()) }

// familyAllocator is the Allocator of one family.
type familyAllocator struct {
	p      *Plugin
	family Family
}

var _ Allocator = (*familyAllocator)(nil)

// IPv4Allocator is the allocator of the IPv4 addresses (ErrIPv4Disabled
// from every call on a node without an IPv4 pod subnet).
func (p *Plugin) IPv4Allocator() Allocator { return &familyAllocator{p: p, family: IPv4} }

// IPv6Allocator is the allocator of the IPv6 addresses.
func (p *Plugin) IPv6Allocator() Allocator { return &familyAllocator{p: p, family: IPv6} }

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
func (p *Plugin) localRouteExclusions(st *addressing.State) []exclusion {
	var out []exclusion
	for _, f := range st.Families() {
		routes, err := localroutes.Overlaps(f.PodThis, localroutes.Options{})
		if err != nil {
			p.Log.Warn("reading the local routes failed; none excluded", "pod-subnet", f.PodThis.String(), "error", err)
			continue
		}
		for _, r := range routes {
			out = append(out, exclusion{prefix: r.Prefix, owner: "local route: " + r.String()})
		}
	}
	slices.SortFunc(out, func(a, b exclusion) int { return cmp.Compare(a.prefix.String(), b.prefix.String()) })
	return out
}
