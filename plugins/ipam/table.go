package ipam

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/ipam/ipalloc"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// table holds the pod addresses of this node's pod subnet. It is not safe
// for concurrent use: the keeper goroutine owns it.
//
// An address is held from the moment it is decided until its release is
// durable. Durability is tracked per pod: a pod in unsure holds its address
// in memory, but whether its record is in the store is unknown (a write
// of unknown outcome that could not be read back); such a pod's next
// allocation stores the record again before it is acknowledged.
type table struct {
	st *state
	// pool hands out the addresses in the internal mode (nil with an
	// external IPAM).
	pool *ipalloc.Keyed[podmodel.ID]
	// external holds the addresses an external IPAM gave the pods.
	external map[podmodel.ID]netip.Addr
	unsure   map[podmodel.ID]struct{}
}

// newTable returns an empty table for the pod subnet of st: the addresses
// between the gateway (host 1) and the NAT loopback (the address before
// the broadcast) are handed out.
func newTable(st *state) (*table, error) {
	t := &table{st: st, external: map[podmodel.ID]netip.Addr{}, unsure: map[podmodel.ID]struct{}{}}
	if st.cfg.UseExternalIPAM {
		return t, nil
	}
	pool, err := ipalloc.NewKeyed[podmodel.ID](ipalloc.Config{Prefix: st.podThis, ReserveLow: 2, ReserveHigh: 2})
	if err != nil {
		return nil, fmt.Errorf("pod address pool of %s: %w", st.podThis, err)
	}
	t.pool = pool
	return t, nil
}

func (t *table) externalMode() bool { return t.pool == nil }

// lookup finds the pod's address.
func (t *table) lookup(id podmodel.ID) (netip.Addr, bool) {
	if t.externalMode() {
		a, ok := t.external[id]
		return a, ok
	}
	return t.pool.Lookup(id)
}

// owner finds the pod that holds a.
func (t *table) owner(a netip.Addr) (podmodel.ID, bool) {
	if !t.externalMode() {
		return t.pool.Owner(a)
	}
	for id, b := range t.external {
		if b == a {
			return id, true
		}
	}
	return podmodel.ID{}, false
}

// claim records a known allocation (restored or learned from Kubernetes).
func (t *table) claim(id podmodel.ID, a netip.Addr) error {
	if !t.externalMode() {
		return t.pool.AssignAddr(id, a)
	}
	if other, ok := t.owner(a); ok && other != id {
		return fmt.Errorf("address %s of pod %s is already held by pod %s", a, id, other)
	}
	t.external[id] = a
	return nil
}

// drop forgets the pod's address; the address is free again.
func (t *table) drop(id podmodel.ID) {
	delete(t.unsure, id)
	if t.externalMode() {
		delete(t.external, id)
		return
	}
	t.pool.Unassign(id)
}

// len is the number of pods holding an address.
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

// each calls fn for every held address (in address order in the internal
// mode, in no order with an external IPAM) until fn returns false.
func (t *table) each(fn func(podmodel.ID, netip.Addr) bool) {
	if !t.externalMode() {
		t.pool.Range(fn)
		return
	}
	for id, a := range t.external {
		if !fn(id, a) {
			return
		}
	}
}

// decision is the outcome of deciding an allocation in memory.
type decision struct {
	addr netip.Addr
	// store: the record must be written before the caller is answered.
	store bool
	// undo restores the table if the record is not stored.
	undo func()
}

// decide picks the pod's address. An address the pod holds already is
// answered at once unless its record may be missing (unsure).
func (t *table) decide(id podmodel.ID, ipamData string) (decision, error) {
	if t.externalMode() {
		return t.decideExternal(id, ipamData)
	}
	a, existed, err := t.pool.Assign(id)
	if err != nil {
		return decision{}, fmt.Errorf("no IP address is free for allocation in the subnet %s: %w", t.st.podThis, err)
	}
	_, unsure := t.unsure[id]
	d := decision{addr: a, store: !existed || unsure, undo: func() {}}
	if !existed {
		d.undo = func() { t.pool.Unassign(id) }
	}
	return d, nil
}

// cniIPConfig is the part of a CNI IPConfig IPAM reads from ipamData.
type cniIPConfig struct {
	Address string `json:"address"`
	Gateway string `json:"gateway,omitempty"`
}

// parseExternal reads the pod's address from an external IPAM's result.
func parseExternal(ipamData string) (netip.Addr, error) {
	var c cniIPConfig
	if err := json.Unmarshal([]byte(ipamData), &c); err != nil {
		return netip.Addr{}, fmt.Errorf("error by unmarshalling external IPAM result: ipamData %q: %w", ipamData, err)
	}
	pfx, err := netip.ParsePrefix(c.Address)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("external IPAM result: address %q: want an address with a prefix length (10.1.1.5/24)", c.Address)
	}
	return pfx.Addr(), nil
}

// decideExternal records the address an external IPAM gave the pod. The
// same pod with the same address again is idempotent; with another address
// it replaces the old one.
func (t *table) decideExternal(id podmodel.ID, ipamData string) (decision, error) {
	a, err := parseExternal(ipamData)
	if err != nil {
		return decision{}, err
	}
	old, had := t.external[id]
	_, unsure := t.unsure[id]
	if had && old == a {
		return decision{addr: a, store: unsure, undo: func() {}}, nil
	}
	if other, ok := t.owner(a); ok {
		return decision{}, fmt.Errorf("external IPAM result: address %s of pod %s is already held by pod %s", a, id, other)
	}
	t.external[id] = a
	undo := func() { delete(t.external, id) }
	if had {
		undo = func() { t.external[id] = old }
	}
	return decision{addr: a, store: true, undo: undo}, nil
}
