package keeper

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// Addrs are the addresses of one allocation, one per family of the node:
// slot 0 is the primary family of contiv.conf, slot 1 the second family of
// a dual-stack node (ipamConfig.dualStack). An allocation of a pod holds
// one address in every family of the node; an owner-keyed allocation (the
// Cilium-style API) holds the families it asked for.
type Addrs [2]netip.Addr

// First is the First address held (slot order), invalid when none.
func (as Addrs) First() netip.Addr {
	for _, a := range as {
		if a.IsValid() {
			return a
		}
	}
	return netip.Addr{}
}

// List is the valid addresses, in slot order.
func (as Addrs) List() []netip.Addr {
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

// String is the addresses joined with commas.
func (as Addrs) String() string {
	var b strings.Builder
	for i, a := range as.List() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.String())
	}
	return b.String()
}

// table holds the allocations of this node's pod subnets, each under its
// allocKey, with the pod of each and an index pod -> keys. It is not safe
// for concurrent use: the keeper goroutine owns it.
//
// An address is held from the moment it is decided until its release is
// durable. Durability is tracked per allocation: a key in unsure holds its
// addresses in memory, but whether its record is in the store is unknown
// (a write of unknown outcome that could not be read back); such a key's
// next allocation stores the record again before it is acknowledged.
type table struct {
	st *addressing.State
	// blocks are the pod subnets of each slot in the internal mode (none
	// with an external IPAM, and none in slot 1 on a single-stack node):
	// blocks[i][0] is the subnet cut from the node ID, the others were
	// added (AddPool), in the order they are tried.
	blocks [2][]*block
	// external holds the addresses an external IPAM gave (external mode).
	external map[allocKey]Addrs
	// pods is the pod of each allocation that is not pod-keyed; byPod
	// lists the allocations of each pod (every kind).
	pods   map[allocKey]podmodel.ID
	byPod  map[podmodel.ID][]allocKey // sorted by compareKeys; most pods have one
	unsure map[allocKey]struct{}
	// resv holds the expiring reservations (see reservation.go).
	resv map[allocKey]reservation
	// excl holds the excluded addresses (see exclusion.go).
	excl exclusions
	// seq is the last sequence number of an owner-keyed allocation.
	seq uint64
	// born is when each allocation was made, when known.
	born map[allocKey]time.Time
	// uids is the pod UID of each allocation made by a CNI ADD that
	// carried K8S_POD_UID (none for the others): a Kubernetes pod of the
	// same name with another UID is another pod.
	uids map[allocKey]string
	// cool holds the released addresses through their cooldown
	// (cooldown.go).
	cool cooldowns
}

// newTable returns an empty table for the pod subnets of st: the
// addresses between the gateway (host 1) and the NAT loopback (the
// address before the broadcast) are handed out.
func newTable(st *addressing.State) (*table, error) {
	t := &table{st: st, external: map[allocKey]Addrs{}, pods: map[allocKey]podmodel.ID{},
		byPod: map[podmodel.ID][]allocKey{}, unsure: map[allocKey]struct{}{}, resv: map[allocKey]reservation{},
		excl: newExclusions(), born: map[allocKey]time.Time{}, uids: map[allocKey]string{}, cool: newCooldowns()}
	if st.Cfg.UseExternalIPAM {
		return t, nil
	}
	for i, f := range st.Families() {
		b, err := newBlock(f.PodThis)
		if err != nil {
			return nil, err
		}
		t.blocks[i] = []*block{b}
	}
	return t, nil
}

func (t *table) externalMode() bool { return len(t.blocks[0]) == 0 }

// slots is the number of families of the node.
func (t *table) slots() int { return len(t.st.Families()) }

// slotOf is the slot of a's family, false when the node has no such
// family.
func (t *table) slotOf(a netip.Addr) (int, bool) { return t.st.SlotOf(a) }

// pool is the pool of the first block of slot i (the subnet cut from the
// node ID; nil in the external mode).
func (t *table) pool(i int) *ipalloc.Keyed[allocKey] {
	if len(t.blocks[i]) == 0 {
		return nil
	}
	return t.blocks[i][0].pool
}

// lookupAll finds the allocation's addresses.
func (t *table) lookupAll(k allocKey) (as Addrs, ok bool) {
	if t.externalMode() {
		as, ok = t.external[k]
		return as, ok
	}
	for i, bs := range t.blocks {
		for _, b := range bs {
			if a, found := b.pool.Lookup(k); found {
				as[i], ok = a, true
				break
			}
		}
	}
	return as, ok
}

// lookup finds the allocation's first address (its primary family's
// when it has one).
func (t *table) lookup(k allocKey) (netip.Addr, bool) {
	as, ok := t.lookupAll(k)
	return as.First(), ok
}

// owner finds the allocation that holds a (an excluded address that no
// allocation holds has none).
func (t *table) owner(a netip.Addr) (allocKey, bool) {
	if !t.externalMode() {
		p := t.poolOf(a)
		if p == nil {
			return allocKey{}, false
		}
		k, held := p.Owner(a)
		return k, held && !k.excluded() && !k.cooling()
	}
	for k, as := range t.external {
		if slices.Contains(as[:], a) {
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

// keysOf lists the allocations of the pod in a stable order. The slice is
// the table's: read it before the table changes, never modify it.
func (t *table) keysOf(id podmodel.ID) []allocKey { return t.byPod[id] }

// podAddr is the pod's address for the pod-ID API: the one of interface
// eth0 when it has several, else the lowest (first family).
func (t *table) podAddr(id podmodel.ID) (allocKey, netip.Addr, bool) {
	var best allocKey
	var addr netip.Addr
	for _, k := range t.keysOf(id) {
		if k.ownerKeyed() {
			continue
		}
		a, _ := t.lookup(k)
		eth0, bestEth0 := k.att.IfName == "eth0", best.att.IfName == "eth0"
		if !addr.IsValid() || eth0 && !bestEth0 || eth0 == bestEth0 && a.Less(addr) {
			best, addr = k, a
		}
	}
	return best, addr, addr.IsValid()
}

// claim records a known allocation (restored or learned from
// Kubernetes): all of its addresses, or none.
func (t *table) claim(k allocKey, pod podmodel.ID, as Addrs) error {
	if !t.externalMode() {
		for _, a := range as {
			if !a.IsValid() {
				continue
			}
			p := t.poolOf(a)
			if p == nil {
				t.unassign(k)
				return fmt.Errorf("address %s of %s: not in a pod subnet of this node", a, k)
			}
			if err := p.AssignAddr(k, a); err != nil {
				t.unassign(k)
				return err
			}
		}
	} else {
		for _, a := range as.List() {
			if other, ok := t.owner(a); ok && other != k {
				return fmt.Errorf("address %s of %s is already held by %s", a, k, other)
			}
		}
		t.external[k] = as
	}
	t.index(k, pod)
	return nil
}

// index adds k of pod to the indexes.
func (t *table) index(k allocKey, pod podmodel.ID) {
	if !k.podKeyed() {
		t.pods[k] = pod
	}
	if k.seq > t.seq {
		t.seq = k.seq
	}
	keys := t.byPod[pod]
	if i, found := slices.BinarySearchFunc(keys, k, compareKeys); !found {
		t.byPod[pod] = slices.Insert(slices.Clip(keys), i, k) // a new array: keysOf results stay valid
	}
}

// drop forgets the allocation; its addresses are free again (or excluded,
// when an exclusion covers them).
func (t *table) drop(k allocKey) {
	if as, ok := t.forget(k); ok {
		t.excludeFreed(as)
	}
}

// forget forgets the allocation and returns its addresses, which are
// free: the caller re-assigns or excludes them.
func (t *table) forget(k allocKey) (Addrs, bool) {
	as, ok := t.lookupAll(k)
	if !ok {
		return Addrs{}, false
	}
	pod := t.podOf(k)
	delete(t.unsure, k)
	delete(t.pods, k)
	delete(t.resv, k)
	delete(t.born, k)
	delete(t.uids, k)
	keys := t.byPod[pod]
	if i, found := slices.BinarySearchFunc(keys, k, compareKeys); found {
		if len(keys) == 1 {
			delete(t.byPod, pod)
		} else {
			t.byPod[pod] = slices.Delete(slices.Clone(keys), i, i+1)
		}
	}
	if t.externalMode() {
		delete(t.external, k)
		return as, true
	}
	t.unassign(k)
	return as, true
}

// unassign frees k's addresses in every pool.
func (t *table) unassign(k allocKey) {
	for _, bs := range t.blocks {
		for _, b := range bs {
			b.pool.Unassign(k)
		}
	}
}

// len is the number of allocations (exclusions are not allocations, and
// are not indexed).
func (t *table) len() int {
	if t.externalMode() {
		return len(t.external)
	}
	n := 0
	for _, keys := range t.byPod {
		n += len(keys)
	}
	return n
}

// count is the number of addresses allocations hold in slot i
// (exclusions are not allocations).
func (t *table) count(i int) int {
	n := 0
	if t.externalMode() {
		for _, as := range t.external {
			if as[i].IsValid() {
				n++
			}
		}
		return n
	}
	for _, b := range t.blocks[i] {
		n += b.pool.Len()
	}
	return n - t.excludedCount(i) - t.coolingCount(i)
}

// size is the number of addresses the internal pool of slot i can hand
// out (0 with an external IPAM or without the family).
func (t *table) size(i int) uint64 {
	var n uint64
	for _, b := range t.blocks[i] {
		n += b.pool.Pool().Size()
	}
	return n
}

// free is the number of free addresses of slot i: excluded ones are
// taken.
func (t *table) free(i int) uint64 {
	var n uint64
	for _, b := range t.blocks[i] {
		if !b.revoked { // nothing new is handed out from a revoked block
			n += b.pool.Pool().Free()
		}
	}
	return n
}

// each calls fn for every allocation (in the order of its first
// address, block by block, in the internal mode; in no order with an
// external IPAM) until fn returns false. Exclusions and cooling
// addresses are not allocations.
func (t *table) each(fn func(k allocKey, pod podmodel.ID, as Addrs) bool) {
	if t.externalMode() {
		for k, as := range t.external {
			if !fn(k, t.podOf(k), as) {
				return
			}
		}
		return
	}
	seen := map[allocKey]struct{}{}
	for _, bs := range t.blocks {
		for _, b := range bs {
			more := true
			b.pool.Range(func(k allocKey, _ netip.Addr) bool {
				if k.excluded() || k.cooling() {
					return true
				}
				if _, ok := seen[k]; ok {
					return true
				}
				seen[k] = struct{}{}
				as, _ := t.lookupAll(k)
				more = fn(k, t.podOf(k), as)
				return more
			})
			if !more {
				return
			}
		}
	}
}

// decision is the outcome of deciding an allocation in memory.
type decision struct {
	addrs Addrs
	// store: the record must be written before the caller is answered.
	store bool
	// adopted is the pod-keyed allocation the key took over: its record
	// is deleted with the store of the new one.
	adopted *allocKey
	// fresh: the addresses were handed out by this decision.
	fresh bool
	// undo restores the table if the record is not stored.
	undo func()
}

// decide picks the addresses of allocation k of pod: the ones k holds
// (answered at once unless its record may be missing), else the pod's
// pod-keyed allocation (adopted: same addresses, re-keyed), else new ones
// in every family of the node (all or none: when one family has none
// free, the others are rolled back).
func (t *table) decide(k allocKey, pod podmodel.ID, ipamData string) (decision, error) {
	if t.externalMode() {
		return t.decideExternal(k, pod, ipamData)
	}
	if as, ok := t.lookupAll(k); ok {
		_, unsure := t.unsure[k]
		return decision{addrs: as, store: unsure, undo: func() {}}, nil
	}
	if old := podKeyOf(pod); !k.podKeyed() {
		if as, ok := t.lookupAll(old); ok {
			return t.adopt(k, old, pod, as), nil
		}
	}
	as, err := t.assign(k, t.allSlots())
	if err != nil {
		return decision{}, err
	}
	t.index(k, pod)
	return decision{addrs: as, store: true, fresh: true, undo: func() { t.drop(k) }}, nil
}

// allSlots lists the slots of the node's families.
func (t *table) allSlots() []int {
	if t.slots() == 2 {
		return []int{0, 1}
	}
	return []int{0}
}

// assign hands out k one new address in each slot listed, next-fit, or
// none: a slot with no address free rolls back the ones taken before it
// (ErrPoolExhausted names the subnet). It does not index k.
//
// A rollback leaves the pools as they were, next-fit cursors included: the
// address given back is the next one handed out, as if the call had not
// happened.
func (t *table) assign(k allocKey, slots []int) (Addrs, error) {
	var as Addrs
	type mark struct {
		pool   *ipalloc.Pool
		cursor netip.Addr
	}
	var marks []mark
	for _, i := range slots {
		for _, b := range t.blocks[i] {
			marks = append(marks, mark{b.pool.Pool(), b.pool.Pool().Cursor()})
		}
	}
	rollback := func() {
		t.unassign(k)
		for _, m := range marks {
			_ = m.pool.SetCursor(m.cursor) // it was the pool's cursor: inside the prefix
		}
	}
	for _, i := range slots {
		if len(t.blocks[i]) == 0 {
			rollback()
			return Addrs{}, fmt.Errorf("%w: this node has no pod subnet of that family", errFamilyDisabled(t.st, i))
		}
		a, err := t.assignSlot(k, i)
		if err != nil {
			rollback()
			return Addrs{}, fmt.Errorf("no IP address is free for allocation in the %s: %w", t.blockWords(i), err)
		}
		as[i] = a
	}
	return as, nil
}

// blockWords names the pod subnets of slot i: "subnet 10.1.1.0/24", or
// "subnets 10.1.1.0/24,10.2.0.0/26".
func (t *table) blockWords(i int) string {
	if len(t.blocks[i]) == 1 {
		return "subnet " + t.blockList(i)
	}
	return "subnets " + t.blockList(i)
}

// blockList names the blocks of slot i.
func (t *table) blockList(i int) string {
	var out []string
	for _, b := range t.blocks[i] {
		out = append(out, b.prefix.String())
	}
	return strings.Join(out, ",")
}

// assignSlot hands k the next free address of slot i: next-fit in the
// first block with one free; with none free in any block, the address
// whose cooldown ends first (a cooldown never makes an allocation fail
// while an address could be handed out).
func (t *table) assignSlot(k allocKey, i int) (netip.Addr, error) {
	var err error
	for _, b := range t.blocks[i] {
		if b.revoked {
			continue
		}
		var a netip.Addr
		if a, _, err = b.pool.Assign(k); err == nil {
			return a, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("every pool of the family is revoked: %w", ipalloc.ErrPoolExhausted)
	}
	c, ok := t.coolestOf(i)
	if b, _, in := t.blockOf(c); !ok || in && b.revoked {
		return netip.Addr{}, err
	}
	t.unCool(c)
	if err := t.poolOf(c).AssignAddr(k, c); err != nil {
		return netip.Addr{}, err
	}
	t.cool.reused++
	return c, nil
}

// adopt moves the addresses of the pod-keyed allocation old to k.
func (t *table) adopt(k, old allocKey, pod podmodel.ID, as Addrs) decision {
	born, known := t.born[old]
	_, wasUnsure := t.unsure[old]
	t.forget(old)
	_ = t.claim(k, pod, as) // the addresses were just freed: it cannot fail
	if known {
		t.born[k] = born
	}
	undo := func() {
		t.forget(k)
		_ = t.claim(old, pod, as)
		if known {
			t.born[old] = born
		}
		if wasUnsure { // its record is still of unknown state
			t.unsure[old] = struct{}{}
		}
	}
	return decision{addrs: as, store: true, adopted: &old, undo: undo}
}

// cniIPConfig is the part of a CNI IPConfig IPAM reads from ipamData.
type cniIPConfig struct {
	Address string `json:"address"`
	Gateway string `json:"gateway,omitempty"`
}

// parseExternal reads the pod's addresses from an external IPAM's result:
// ipamData is one IPConfig, or a JSON array of them (one per family, from
// a dual-stack IPAM). The error wraps podmanager.ErrBadRequest.
func parseExternal(st *addressing.State, ipamData string) (Addrs, error) {
	var list []cniIPConfig
	trimmed := strings.TrimSpace(ipamData)
	var err error
	if strings.HasPrefix(trimmed, "[") {
		err = json.Unmarshal([]byte(trimmed), &list)
	} else {
		var c cniIPConfig
		err = json.Unmarshal([]byte(trimmed), &c)
		list = []cniIPConfig{c}
	}
	if err != nil {
		return Addrs{}, fmt.Errorf("error by unmarshalling external IPAM result: ipamData %.200q: %w: %w", ipamData, podmanager.ErrBadRequest, err)
	}
	var as Addrs
	for _, c := range list {
		pfx, err := netip.ParsePrefix(c.Address)
		if err != nil {
			return Addrs{}, fmt.Errorf("external IPAM result: address %q: want an address with a prefix length (10.1.1.5/24): %w", c.Address, podmanager.ErrBadRequest)
		}
		a := pfx.Addr().Unmap()
		i, ok := st.SlotOf(a)
		switch {
		case !ok:
			return Addrs{}, fmt.Errorf("external IPAM result: address %s: this node has no pod subnet of its family: %w", a, podmanager.ErrBadRequest)
		case as[i].IsValid():
			return Addrs{}, fmt.Errorf("external IPAM result: addresses %s and %s are of one family, want one per family: %w", as[i], a, podmanager.ErrBadRequest)
		}
		as[i] = a
	}
	if !as.First().IsValid() {
		return Addrs{}, fmt.Errorf("external IPAM result: ipamData %.200q holds no address: %w", ipamData, podmanager.ErrBadRequest)
	}
	return as, nil
}

// decideExternal records the addresses an external IPAM gave. The same
// key with the same addresses again is idempotent; with others they
// replace the old ones.
func (t *table) decideExternal(k allocKey, pod podmodel.ID, ipamData string) (decision, error) {
	as, err := parseExternal(t.st, ipamData)
	if err != nil {
		return decision{}, err
	}
	old, had := t.external[k]
	if had && old == as {
		_, unsure := t.unsure[k]
		return decision{addrs: as, store: unsure, undo: func() {}}, nil
	}
	if pk := podKeyOf(pod); !k.podKeyed() && !had {
		if b, ok := t.external[pk]; ok && b == as {
			return t.adopt(k, pk, pod, as), nil
		}
	}
	for _, a := range as.List() {
		if other, ok := t.owner(a); ok && other != k {
			return decision{}, fmt.Errorf("external IPAM result: address %s of %s is already held by %s", a, k, other)
		}
	}
	t.external[k] = as
	t.index(k, pod)
	undo := func() { t.drop(k) }
	if had {
		undo = func() { t.external[k] = old }
	}
	return decision{addrs: as, store: true, undo: undo}, nil
}
