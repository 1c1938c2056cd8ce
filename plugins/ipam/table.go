package ipam

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/contiv-ipam/agent/plugins/ipam/ipalloc"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// table holds the allocations of this node's pod subnet, each under its
// allocKey, with the pod of each and an index pod -> keys. It is not safe
// for concurrent use: the keeper goroutine owns it.
//
// An address is held from the moment it is decided until its release is
// durable. Durability is tracked per allocation: a key in unsure holds its
// address in memory, but whether its record is in the store is unknown (a
// write of unknown outcome that could not be read back); such a key's next
// allocation stores the record again before it is acknowledged.
type table struct {
	st *state
	// pool hands out the addresses in the internal mode (nil with an
	// external IPAM).
	pool *ipalloc.Keyed[allocKey]
	// external holds the addresses an external IPAM gave (external mode).
	external map[allocKey]netip.Addr
	// pods is the pod of each attachment-keyed allocation; byPod lists
	// the allocations of each pod (both kinds).
	pods   map[allocKey]podmodel.ID
	byPod  map[podmodel.ID]map[allocKey]struct{}
	unsure map[allocKey]struct{}
}

// newTable returns an empty table for the pod subnet of st: the addresses
// between the gateway (host 1) and the NAT loopback (the address before
// the broadcast) are handed out.
func newTable(st *state) (*table, error) {
	t := &table{st: st, external: map[allocKey]netip.Addr{}, pods: map[allocKey]podmodel.ID{},
		byPod: map[podmodel.ID]map[allocKey]struct{}{}, unsure: map[allocKey]struct{}{}}
	if st.cfg.UseExternalIPAM {
		return t, nil
	}
	pool, err := ipalloc.NewKeyed[allocKey](ipalloc.Config{Prefix: st.podThis, ReserveLow: 2, ReserveHigh: 2})
	if err != nil {
		return nil, fmt.Errorf("pod address pool of %s: %w", st.podThis, err)
	}
	t.pool = pool
	return t, nil
}

func (t *table) externalMode() bool { return t.pool == nil }

// lookup finds the allocation's address.
func (t *table) lookup(k allocKey) (netip.Addr, bool) {
	if t.externalMode() {
		a, ok := t.external[k]
		return a, ok
	}
	return t.pool.Lookup(k)
}

// owner finds the allocation that holds a.
func (t *table) owner(a netip.Addr) (allocKey, bool) {
	if !t.externalMode() {
		return t.pool.Owner(a)
	}
	for k, b := range t.external {
		if b == a {
			return k, true
		}
	}
	return allocKey{}, false
}

// podOf is the pod of a held allocation.
func (t *table) podOf(k allocKey) podmodel.ID {
	if k.podKeyed() {
		return k.pod
	}
	return t.pods[k]
}

// keysOf lists the allocations of the pod in a stable order.
func (t *table) keysOf(id podmodel.ID) []allocKey {
	keys := slices.Collect(maps.Keys(t.byPod[id]))
	sortKeys(keys)
	return keys
}

// podAddr is the pod's address for the pod-ID API: the one of interface
// eth0 when it has several, else the lowest.
func (t *table) podAddr(id podmodel.ID) (allocKey, netip.Addr, bool) {
	var best allocKey
	var addr netip.Addr
	for _, k := range t.keysOf(id) {
		a, _ := t.lookup(k)
		eth0, bestEth0 := k.att.IfName == "eth0", best.att.IfName == "eth0"
		if !addr.IsValid() || eth0 && !bestEth0 || eth0 == bestEth0 && a.Less(addr) {
			best, addr = k, a
		}
	}
	return best, addr, addr.IsValid()
}

// claim records a known allocation (restored or learned from Kubernetes).
func (t *table) claim(k allocKey, pod podmodel.ID, a netip.Addr) error {
	if !t.externalMode() {
		if err := t.pool.AssignAddr(k, a); err != nil {
			return err
		}
	} else {
		if other, ok := t.owner(a); ok && other != k {
			return fmt.Errorf("address %s of %s is already held by %s", a, k, other)
		}
		t.external[k] = a
	}
	t.index(k, pod)
	return nil
}

// index adds k of pod to the indexes.
func (t *table) index(k allocKey, pod podmodel.ID) {
	if !k.podKeyed() {
		t.pods[k] = pod
	}
	if t.byPod[pod] == nil {
		t.byPod[pod] = map[allocKey]struct{}{}
	}
	t.byPod[pod][k] = struct{}{}
}

// drop forgets the allocation; its address is free again.
func (t *table) drop(k allocKey) {
	if _, ok := t.lookup(k); !ok {
		return
	}
	pod := t.podOf(k)
	delete(t.unsure, k)
	delete(t.pods, k)
	if keys := t.byPod[pod]; keys != nil {
		delete(keys, k)
		if len(keys) == 0 {
			delete(t.byPod, pod)
		}
	}
	if t.externalMode() {
		delete(t.external, k)
		return
	}
	t.pool.Unassign(k)
}

// len is the number of allocations.
func (t *table) len() int {
	if t.externalMode() {
		return len(t.external)
	}
	return t.pool.Len()
}

// size is the number of addresses the internal pool can hand out (0 with
// an external IPAM).
func (t *table) size() uint64 {
	if t.externalMode() {
		return 0
	}
	return t.pool.Pool().Size()
}

// each calls fn for every allocation (in address order in the internal
// mode, in no order with an external IPAM) until fn returns false.
func (t *table) each(fn func(k allocKey, pod podmodel.ID, a netip.Addr) bool) {
	if !t.externalMode() {
		t.pool.Range(func(k allocKey, a netip.Addr) bool { return fn(k, t.podOf(k), a) })
		return
	}
	for k, a := range t.external {
		if !fn(k, t.podOf(k), a) {
			return
		}
	}
}

// decision is the outcome of deciding an allocation in memory.
type decision struct {
	addr netip.Addr
	// store: the record must be written before the caller is answered.
	store bool
	// adopted is the pod-keyed allocation the key took over: its record
	// is deleted with the store of the new one.
	adopted *allocKey
	// undo restores the table if the record is not stored.
	undo func()
}

// decide picks the address of allocation k of pod: the one k holds
// (answered at once unless its record may be missing), else the pod's
// pod-keyed allocation (adopted: same address, re-keyed), else a new one.
func (t *table) decide(k allocKey, pod podmodel.ID, ipamData string) (decision, error) {
	if t.externalMode() {
		return t.decideExternal(k, pod, ipamData)
	}
	if a, ok := t.lookup(k); ok {
		_, unsure := t.unsure[k]
		return decision{addr: a, store: unsure, undo: func() {}}, nil
	}
	if old := podKeyOf(pod); !k.podKeyed() {
		if a, ok := t.lookup(old); ok {
			return t.adopt(k, old, pod, a), nil
		}
	}
	a, _, err := t.pool.Assign(k)
	if err != nil {
		return decision{}, fmt.Errorf("no IP address is free for allocation in the subnet %s: %w", t.st.podThis, err)
	}
	t.index(k, pod)
	return decision{addr: a, store: true, undo: func() { t.drop(k) }}, nil
}

// adopt moves the address of the pod-keyed allocation old to k.
func (t *table) adopt(k, old allocKey, pod podmodel.ID, a netip.Addr) decision {
	t.drop(old)
	_ = t.claim(k, pod, a) // the address was just freed: it cannot fail
	undo := func() {
		t.drop(k)
		_ = t.claim(old, pod, a)
	}
	return decision{addr: a, store: true, adopted: &old, undo: undo}
}

// cniIPConfig is the part of a CNI IPConfig IPAM reads from ipamData.
type cniIPConfig struct {
	Address string `json:"address"`
	Gateway string `json:"gateway,omitempty"`
}

// parseExternal reads the pod's address from an external IPAM's result;
// the error wraps podmanager.ErrBadRequest.
func parseExternal(ipamData string) (netip.Addr, error) {
	var c cniIPConfig
	if err := json.Unmarshal([]byte(ipamData), &c); err != nil {
		return netip.Addr{}, fmt.Errorf("error by unmarshalling external IPAM result: ipamData %q: %w: %w", ipamData, podmanager.ErrBadRequest, err)
	}
	pfx, err := netip.ParsePrefix(c.Address)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("external IPAM result: address %q: want an address with a prefix length (10.1.1.5/24): %w", c.Address, podmanager.ErrBadRequest)
	}
	return pfx.Addr(), nil
}

// decideExternal records the address an external IPAM gave. The same key
// with the same address again is idempotent; with another address it
// replaces the old one.
func (t *table) decideExternal(k allocKey, pod podmodel.ID, ipamData string) (decision, error) {
	a, err := parseExternal(ipamData)
	if err != nil {
		return decision{}, err
	}
	old, had := t.external[k]
	if had && old == a {
		_, unsure := t.unsure[k]
		return decision{addr: a, store: unsure, undo: func() {}}, nil
	}
	if pk := podKeyOf(pod); !k.podKeyed() && !had {
		if b, ok := t.external[pk]; ok && b == a {
			return t.adopt(k, pk, pod, a), nil
		}
	}
	if other, ok := t.owner(a); ok && other != k {
		return decision{}, fmt.Errorf("external IPAM result: address %s of %s is already held by %s", a, k, other)
	}
	t.external[k] = a
	t.index(k, pod)
	undo := func() { t.drop(k) }
	if had {
		undo = func() { t.external[k] = old }
	}
	return decision{addr: a, store: true, undo: undo}, nil
}
