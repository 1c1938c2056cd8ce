package ipam

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// This file is the allocation surface of Cilium's agent IPAM (seed 002),
// on our engine and behind the keeper like every other change: each call
// runs on the keeper's goroutine as a barrier and returns once its
// records are durable. Owners are names (Cilium's "namespace/pod",
// "router", ...); their allocations are owner-keyed (see allocKey).

// Family is an address family of the Cilium-style API.
type Family string

// The families.
const (
	IPv4 Family = "ipv4"
	IPv6 Family = "ipv6"
)

// DeriveFamily is the family of ip.
func DeriveFamily(ip net.IP) Family {
	if ip.To4() != nil {
		return IPv4
	}
	return IPv6
}

// Errors of the Cilium-style API that callers branch on.
var (
	// ErrIPv4Disabled: this node has no IPv4 pod subnet.
	ErrIPv4Disabled = errors.New("IPv4 allocation disabled")
	// ErrIPv6Disabled: this node has no IPv6 pod subnet.
	ErrIPv6Disabled = errors.New("IPv6 allocation disabled")
	// ErrExcluded: the address is excluded (BlacklistIP, excludeIPs, a
	// local route) and is never handed out.
	ErrExcluded = errors.New("the address is excluded from allocation")
	// ErrNotAllocated: no allocation holds the address, or the owner
	// holds none.
	ErrNotAllocated = errors.New("not allocated")
	// ErrTimerExists: the allocation has an expiration timer already.
	ErrTimerExists = errors.New("an expiration timer is registered already")
	// ErrExternalIPAM: an external IPAM hands out this node's pod
	// addresses (useExternalIPAM); the agent allocates none itself.
	ErrExternalIPAM = errors.New("pod addresses come from an external IPAM (useExternalIPAM)")
)

// AllocationResult is one address handed out.
type AllocationResult struct {
	// IP is the address.
	IP net.IP
	// CIDRs are the networks the address reaches directly: its pod
	// subnet.
	CIDRs []string
	// GatewayIP is the pod gateway of its subnet.
	GatewayIP string
	// ExpirationUUID is the ID of its expiration timer (only from
	// AllocateNextWithExpiration).
	ExpirationUUID string
}

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

// disabledErr is the error of a family the node does not have.
func disabledErr(v6 bool) error {
	if v6 {
		return ErrIPv6Disabled
	}
	return ErrIPv4Disabled
}

// errFamilyDisabled is the error of slot i on a node without it: the
// family that is not the primary one.
func errFamilyDisabled(st *addressing.State, i int) error {
	v6 := st.PodThis.Addr().Is6()
	if i > 0 {
		v6 = !v6
	}
	return disabledErr(v6)
}

// familySlot is the slot of family f on the node of t.
func (t *table) familySlot(f Family) (int, error) {
	for i, fs := range t.st.Families() {
		if fs.PodThis.Addr().Is6() == (f == IPv6) {
			return i, nil
		}
	}
	return 0, disabledErr(f == IPv6)
}

// exec runs fn on the keeper's goroutine as a barrier, with nothing in
// flight, and commits the writes fn adds to b before it returns; their
// done callbacks run before exec returns. Before the first resync it
// fails with errNotReady.
func (k *keeper) exec(fn func(t *table, b *batch) error) error {
	var err error
	ran := false
	rep := k.do(&request{kind: reqRead, read: func(t *table) {
		ran = true
		b := newBatch()
		err = fn(t, b)
		k.flush(b)
	}})
	switch {
	case rep.err != nil:
		return rep.err
	case !ran:
		return errNotReady
	}
	return err
}

// ownerAlloc is one owner-keyed allocation to make: new addresses in the
// slots listed, or the address at (a specific one), with an expiration
// timer when timeout > 0.
type ownerAlloc struct {
	owner   string
	slots   []int
	at      netip.Addr
	timeout time.Duration
}

// allocateOwned decides an owner-keyed allocation and adds its record to
// b; *res is filled once the record is durable, *err otherwise.
func (k *keeper) allocateOwned(t *table, b *batch, oa ownerAlloc, res *[]*AllocationResult, errp *error) error {
	if err := checkOwner(oa.owner); err != nil {
		return fmt.Errorf("owner name %.80q %w", oa.owner, err)
	}
	if t.externalMode() {
		return fmt.Errorf("allocating for owner %q: %w", oa.owner, ErrExternalIPAM)
	}
	key := ownerKeyOf(oa.owner, t.seq+1)
	var as addrs
	var err error
	if oa.at.IsValid() {
		as, err = t.claimAddr(key, oa.at)
	} else {
		as, err = t.assign(key, oa.slots)
	}
	if err != nil {
		return fmt.Errorf("allocating for owner %q: %w", oa.owner, err)
	}
	t.index(key, key.pod)
	b.cursor = b.cursor || !oa.at.IsValid()
	t.born[key] = k.clock.Now()
	d := decision{addrs: as, store: true, fresh: true, undo: func() { t.drop(key) }}
	rv := k.reserve(key, oa.timeout, &d)
	b.add(write{op: kvdb.PutOp(key.storeKey(), t.recordOf(key, key.pod, as, rv)), done: func(o outcome, err error) {
		switch o {
		case durable:
			*res = t.results(as, rv.idOf())
			k.log.Info("address allocated", "owner", oa.owner, "ip", as.String(), "expires", rv != nil)
		case failed:
			d.undo()
			*errp = fmt.Errorf("allocating %s for owner %q: not stored, allocation undone: %w", as, oa.owner, err)
		default:
			t.unsure[key] = struct{}{}
			*errp = fmt.Errorf("allocating %s for owner %q: %w: %w", as, oa.owner, errUnknownOutcome, err)
		}
	}})
	return nil
}

// claimAddr gives key the address a: in the window of its family's pool,
// not excluded, free.
func (t *table) claimAddr(key allocKey, a netip.Addr) (addrs, error) {
	a = a.Unmap()
	i, ok := t.slotOf(a)
	if !ok {
		return addrs{}, fmt.Errorf("address %s: %w", a, disabledErr(a.Is6()))
	}
	b, _, inBlock := t.blockOf(a)
	switch {
	case !inBlock:
		return addrs{}, fmt.Errorf("allocate %s: outside the pod subnets %s: %w", a, t.blockList(i), ipalloc.ErrOutOfRange)
	case !b.pool.Pool().Contains(a):
		return addrs{}, fmt.Errorf("address %s is the %s of the pod subnet %s: %w", a, b.role(a), b.prefix, ipalloc.ErrReserved)
	}
	if owner, ex := t.excludedBy(a); ex {
		return addrs{}, fmt.Errorf("address %s (excluded by %q): %w", a, owner, ErrExcluded)
	}
	if other, held := t.owner(a); held {
		return addrs{}, fmt.Errorf("address %s is held by %s: %w", a, other, ipalloc.ErrTaken)
	}
	var as addrs
	if err := b.pool.AssignAddr(key, a); err != nil {
		return addrs{}, err
	}
	as[i] = a
	return as, nil
}

// results are the AllocationResults of as.
func (t *table) results(as addrs, expiration string) []*AllocationResult {
	var out []*AllocationResult
	for _, a := range as {
		b, _, ok := t.blockOf(a)
		if !ok {
			continue
		}
		out = append(out, &AllocationResult{IP: addressing.ToIP(a), CIDRs: []string{b.prefix.String()},
			GatewayIP: b.gw.String(), ExpirationUUID: expiration})
	}
	return out
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
func (p *Plugin) allocate(oa ownerAlloc) ([]*AllocationResult, error) {
	if err := p.checkNodeID(); err != nil {
		return nil, err
	}
	var res []*AllocationResult
	var werr error
	err := p.keeper.exec(func(t *table, b *batch) error {
		if oa.slots == nil && !oa.at.IsValid() {
			oa.slots = t.allSlots()
		}
		if err := p.keeper.allocateOwned(t, b, oa, &res, &werr); err != nil {
			return err
		}
		for i := range t.slots() {
			p.keeper.checkWarm(i)
		}
		return nil
	})
	if err == nil {
		err = werr
	}
	return res, err
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
		t := &table{st: st}
		i, err := t.familySlot(Family(family))
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
// that family.
func (p *Plugin) AllocateNext(family, owner string) (v4, v6 *AllocationResult, err error) {
	return p.AllocateNextWithExpiration(family, owner, 0)
}

// AllocateNextWithExpiration is AllocateNext with an expiration timer of
// timeout (0: none): unless StopExpirationTimer confirms it in time, the
// allocation is released at the deadline. The deadline is stored with
// the allocation and survives a restart.
func (p *Plugin) AllocateNextWithExpiration(family, owner string, timeout time.Duration) (v4, v6 *AllocationResult, err error) {
	slots, err := p.slotsOf(family)
	if err != nil {
		return nil, nil, err
	}
	res, err := p.allocate(ownerAlloc{owner: owner, slots: slots, timeout: timeout})
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
	res, err := p.allocate(ownerAlloc{owner: owner, at: a, timeout: timeout})
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
// it: an owner-keyed allocation of AllocateNext("") gives back both
// families, and so does a pod's (a pod never keeps one family of its
// dual-stack attachment). An address nobody holds is ErrNotAllocated.
// It returns once the release is durable.
func (p *Plugin) ReleaseIP(ip net.IP) error {
	a, ok := addressing.ToAddr(ip)
	if !ok {
		return fmt.Errorf("address %q: not an IP address", ip)
	}
	return p.keeper.exec(func(t *table, b *batch) error {
		key, held := t.owner(a)
		if !held || key.excluded() {
			return fmt.Errorf("releasing %s: %w", a, ErrNotAllocated)
		}
		return p.keeper.releaseKeys(b, []allocKey{key}, "released by IP "+a.String())
	})
}

// releaseKeys adds the deletes of keys to b; the error of the first that
// is not durable is returned through the callbacks (see exec).
func (k *keeper) releaseKeys(b *batch, keys []allocKey, what string) error {
	for _, key := range keys {
		k.addRelease(b, key, k.releaseDone(key, what, nil))
	}
	return nil
}

// ReleaseIPString releases by address (as ReleaseIP) or by owner: every
// allocation of the owner name, and when the name is a pod's
// ("namespace/name") every allocation of that pod. An owner with none is
// ErrNotAllocated.
func (p *Plugin) ReleaseIPString(releaseArg string) error {
	if a, err := netip.ParseAddr(releaseArg); err == nil {
		return p.ReleaseIP(addressing.ToIP(a))
	}
	var failed error
	err := p.keeper.exec(func(t *table, b *batch) error {
		keys := t.ownerKeys(releaseArg)
		if len(keys) == 0 {
			return fmt.Errorf("releasing the addresses of owner %q: %w", releaseArg, ErrNotAllocated)
		}
		for _, key := range keys {
			done := p.keeper.releaseDone(key, "released by owner "+releaseArg, nil)
			p.keeper.addRelease(b, key, func(o outcome, err error) {
				done(o, err)
				if o != durable && failed == nil {
					failed = fmt.Errorf("releasing %s of owner %q: %w", key, releaseArg, err)
				}
			})
		}
		return nil
	})
	return errors.Join(err, failed)
}

// ownerKeys lists the allocations of an owner name: its owner-keyed ones,
// and those of the pod it names.
func (t *table) ownerKeys(owner string) []allocKey {
	keys := append([]allocKey(nil), t.keysOf(podmodel.ID{Namespace: OwnerNamespace, Name: owner})...)
	if ns, name, ok := cutPod(owner); ok {
		keys = append(keys, t.keysOf(podmodel.ID{Namespace: ns, Name: name})...)
	}
	return keys
}

// cutPod splits "namespace/name".
func cutPod(s string) (ns, name string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}
