package ipam

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
)

// This file is the allocation surface of Cilium's agent IPAM (seed 002):
// the calls, their argument forms and per-family Allocators, on the
// keeper's owner-keyed allocations (see keeper.OwnerAlloc), one per
// address as in Cilium. Where it differs from Cilium's pkg/ipam on
// purpose, tests/ciliumdiff lists the difference and its reason, and
// asserts it against Cilium's code.

// Family is an address family of the Cilium-style API.
type Family = keeper.Family

// The families.
const (
	IPv4 = keeper.IPv4
	IPv6 = keeper.IPv6
)

// DeriveFamily is the family of ip.
func DeriveFamily(ip net.IP) Family { return keeper.DeriveFamily(ip) }

// Errors of the Cilium-style API that callers branch on (see keeper).
var (
	ErrIPv4Disabled = keeper.ErrIPv4Disabled
	ErrIPv6Disabled = keeper.ErrIPv6Disabled
	ErrExcluded     = keeper.ErrExcluded
	ErrNotAllocated = keeper.ErrNotAllocated
	// ErrLiveAttachment: see keeper.ErrLiveAttachment.
	ErrLiveAttachment = keeper.ErrLiveAttachment
	ErrTimerExists    = keeper.ErrTimerExists
	ErrExternalIPAM   = keeper.ErrExternalIPAM
	// ErrReservationMismatch: the allocation has no expiration timer of
	// that ID.
	ErrReservationMismatch = keeper.ErrReservationMismatch
)

// AllocationResult is one address handed out.
type AllocationResult = keeper.AllocationResult

// Allocator is the allocator of one family.
type Allocator interface {
	// Allocate allocates ip to owner, or fails.
	Allocate(ip net.IP, owner string) (*AllocationResult, error)
	// Release releases ip (see Plugin.ReleaseIP).
	Release(ip net.IP) error
	// AllocateNext allocates the next free address (next-fit) to owner.
	AllocateNext(owner string) (*AllocationResult, error)
	// Dump maps each allocated address of the family to its owner, and
	// gives a status one-liner.
	Dump() (map[string]string, string)
}

// splitResults sorts results by family.
func splitResults(rs []*AllocationResult) (v4, v6 *AllocationResult) {
	for _, r := range rs {
		if r.IP.To4() != nil {
			v4 = r
		} else {
			v6 = r
		}
	}
	return v4, v6
}

// allocate runs one owner-keyed allocation; like AllocatePodIP it hands
// out nothing from a subnet whose node ID this node lost.
func (p *Plugin) allocate(oa keeper.OwnerAlloc) ([]*AllocationResult, error) {
	if err := p.checkNodeID(); err != nil {
		return nil, err
	}
	return p.keeper.AllocateOwner(oa)
}

// slotsOf resolves a family argument of AllocateNext: "" is every
// family of the node; "ipv4" and "ipv6" one (ErrIPv4Disabled,
// ErrIPv6Disabled when the node has none).
func (p *Plugin) slotsOf(family string) ([]int, error) {
	st := p.st.Load()
	if st == nil {
		return nil, p.notReady()
	}
	switch Family(family) {
	case "":
		return nil, nil
	case IPv4, IPv6:
		i, err := keeper.FamilySlot(st, Family(family))
		if err != nil {
			return nil, err
		}
		return []int{i}, nil
	}
	return nil, fmt.Errorf("family %q: want %q, %q or \"\" (both)", family, IPv4, IPv6)
}

// AllocateNext allocates the next free address of each family to owner:
// family "" gives one of every family of the node, both or neither (when
// the second fails, the first is rolled back); "ipv4" or "ipv6" one of
// that family. Each address is an allocation of its own, released alone
// by ReleaseIP (ReleaseIPString of the owner releases them all).
func (p *Plugin) AllocateNext(family, owner string) (v4, v6 *AllocationResult, err error) {
	return p.AllocateNextWithExpiration(family, owner, 0)
}

// AllocateNextWithExpiration is AllocateNext with an expiration timer of
// timeout (0: none) on each address, each with its own ID
// (AllocationResult.ExpirationUUID), as StartExpirationTimer would start
// it: unless StopExpirationTimer(ip, its ID) stops it in time, that
// address is released at the deadline, the other family's address is
// not. The deadlines are stored with the allocations and survive a
// restart. A negative timeout is refused: a timer that has run out
// before the call returns would be a release.
func (p *Plugin) AllocateNextWithExpiration(family, owner string, timeout time.Duration) (v4, v6 *AllocationResult, err error) {
	if timeout < 0 {
		return nil, nil, fmt.Errorf("expiration timeout %s: want a positive duration, or 0 for none", timeout)
	}
	slots, err := p.slotsOf(family)
	if err != nil {
		return nil, nil, err
	}
	res, err := p.allocate(keeper.OwnerAlloc{Owner: owner, Slots: slots, Timeout: timeout})
	v4, v6 = splitResults(res)
	return v4, v6, err
}

// reserveNext is AllocateNextWithExpiration as the operator's REST reserve
// makes it: one allocation of the addresses of every family asked for,
// under one expiration timer whose ID (in every result) confirms it all,
// released whole.
func (p *Plugin) reserveNext(family, owner string, timeout time.Duration) (v4, v6 *AllocationResult, err error) {
	slots, err := p.slotsOf(family)
	if err != nil {
		return nil, nil, err
	}
	res, err := p.allocate(keeper.OwnerAlloc{Owner: owner, Slots: slots, Timeout: timeout, Joint: true})
	v4, v6 = splitResults(res)
	return v4, v6, err
}

// AllocateNextFamily allocates the next free address of family to owner.
func (p *Plugin) AllocateNextFamily(family Family, owner string) (*AllocationResult, error) {
	if family != IPv4 && family != IPv6 {
		return nil, fmt.Errorf("family %q: want %q or %q", family, IPv4, IPv6)
	}
	v4, v6, err := p.AllocateNext(string(family), owner)
	if family == IPv4 {
		return v4, err
	}
	return v6, err
}

// AllocateIP allocates the address ip to owner: it must be in a pod
// subnet of this node (ErrIPv4Disabled, ErrIPv6Disabled when the node has
// no subnet of its family), not reserved, not excluded and free.
func (p *Plugin) AllocateIP(ip net.IP, owner string) error {
	_, err := p.allocateIP(ip, owner, 0)
	return err
}

// allocateIP allocates ip to owner, with an expiration timer when
// timeout > 0.
func (p *Plugin) allocateIP(ip net.IP, owner string, timeout time.Duration) (*AllocationResult, error) {
	a, ok := addressing.ToAddr(ip)
	if !ok {
		return nil, fmt.Errorf("address %q: not an IP address", ip)
	}
	res, err := p.allocate(keeper.OwnerAlloc{Owner: owner, At: a, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// AllocateIPString is AllocateIP of an address in text form.
func (p *Plugin) AllocateIPString(ipAddr, owner string) error {
	a, err := netip.ParseAddr(ipAddr)
	if err != nil {
		return fmt.Errorf("address %q: not an IP address", ipAddr)
	}
	return p.AllocateIP(addressing.ToIP(a), owner)
}

// ReleaseIP releases the allocation that holds ip, with every address of
// it: an owner-keyed allocation holds one address (AllocateNext("") makes
// one per family, as Cilium does), so that address only; a pod's CNI
// attachment holds every family of the pod and gives back both (a pod
// never keeps one family of its dual-stack attachment). An address nobody
// holds is ErrNotAllocated. It returns once the release is durable.
func (p *Plugin) ReleaseIP(ip net.IP) error {
	a, ok := addressing.ToAddr(ip)
	if !ok {
		return fmt.Errorf("address %q: not an IP address", ip)
	}
	_, err := p.keeper.ReleaseAddr(a, true, nil)
	return err
}

// ReleaseIPString releases by address (as ReleaseIP) or by owner: every
// allocation of the owner name, and when the name is a pod's
// ("namespace/name") every allocation of that pod. An owner with none is
// ErrNotAllocated.
func (p *Plugin) ReleaseIPString(releaseArg string) error {
	if a, err := netip.ParseAddr(releaseArg); err == nil {
		return p.ReleaseIP(addressing.ToIP(a))
	}
	return p.keeper.ReleaseOwner(releaseArg, true)
}
