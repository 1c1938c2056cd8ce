package keeper

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
	// ErrLiveAttachment: a release by address or owner would release the
	// CNI attachment of a pod that may be running (its runtime's DEL or
	// GC releases it); only a forced release does.
	ErrLiveAttachment = errors.New("held by a CNI attachment")
	// ErrMoved: a release by address for a named pod found the address
	// held by another pod or owner (it moved since the caller looked).
	ErrMoved = errors.New("held by another pod or owner")
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
	// ExpirationUUID is the ID of the address's expiration timer (only
	// from AllocateNextWithExpiration): each address has its own.
	ExpirationUUID string
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
// fails with ErrNotReady.
func (k *Keeper) exec(fn func(t *table, b *batch) error) error {
	var err error
	ran := false
	rep := k.Do(&Request{Kind: reqRead, read: func(t *table) {
		ran = true
		b := newBatch()
		err = fn(t, b)
		k.flush(b)
	}})
	switch {
	case rep.Err != nil:
		return rep.Err
	case !ran:
		return ErrNotReady
	}
	return err
}

// OwnerAlloc is an owner-keyed allocation to make: new addresses in the
// slots listed, or the address at (a specific one), with an expiration
// timer when timeout > 0. The new addresses are one allocation each (the
// Cilium-style API: each has its own timer and is released alone), or,
// Joint, one allocation of them all, under one timer and released whole
// (the operator's REST reserve).
type OwnerAlloc struct {
	Owner   string
	Slots   []int
	At      netip.Addr
	Timeout time.Duration
	Joint   bool
}

// allocateOwned decides the owner-keyed allocations of oa and adds their
// records to b: one allocation per address unless oa.Joint, as Cilium
// keeps one per address, so that each address has its own expiration
// timer (its own ID, stopped, started and expiring alone) and ReleaseIP
// gives back that address only. The records are the first writes of b,
// stored in one transaction: all the addresses or none. *res is filled
// (one result per address, in slot order) once the records are durable,
// *err otherwise.
func (k *Keeper) allocateOwned(t *table, b *batch, oa OwnerAlloc, res *[]*AllocationResult, errp *error) error {
	if err := CheckOwner(oa.Owner); err != nil {
		return fmt.Errorf("owner name %.80q %w", oa.Owner, err)
	}
	if t.externalMode() {
		return fmt.Errorf("allocating for owner %q: %w", oa.Owner, ErrExternalIPAM)
	}
	var keys []allocKey
	var addrs []Addrs
	var err error
	if oa.At.IsValid() {
		key := ownerKeyOf(oa.Owner, t.seq+1)
		var as Addrs
		as, err = t.claimAddr(key, oa.At)
		keys, addrs = []allocKey{key}, []Addrs{as}
	} else if oa.Joint {
		key := ownerKeyOf(oa.Owner, t.seq+1)
		var as Addrs
		as, err = t.assign(key, oa.Slots)
		keys, addrs = []allocKey{key}, []Addrs{as}
	} else {
		keys, addrs, err = t.assignEach(oa.Owner, oa.Slots)
	}
	if err != nil {
		return fmt.Errorf("allocating for owner %q: %w", oa.Owner, err)
	}
	b.cursor = b.cursor || !oa.At.IsValid()
	var out []*AllocationResult
	pending := len(keys)
	for j, key := range keys {
		as := addrs[j]
		t.index(key, key.pod)
		t.born[key] = k.clock.Now()
		d := decision{addrs: as, store: true, fresh: true, undo: func() { t.drop(key) }}
		rv := k.reserve(key, oa.Timeout, &d)
		b.add(write{op: kvdb.PutOp(key.storeKey(), t.recordOf(key, key.pod, as, rv)), done: func(o outcome, err error) {
			switch o {
			case durable:
				out = append(out, t.results(as, rv.idOf())...)
				k.noteAllocated()
				k.log.Info("address allocated", "owner", oa.Owner, "ip", as.String(), "expires", rv != nil)
			case failed:
				d.undo()
				if *errp == nil {
					*errp = fmt.Errorf("allocating %s for owner %q: not stored, allocation undone: %w", as, oa.Owner, err)
				}
			default:
				t.unsure[key] = struct{}{}
				if *errp == nil {
					*errp = fmt.Errorf("allocating %s for owner %q: %w: %w", as, oa.Owner, ErrUnknownOutcome, err)
				}
			}
			if pending--; pending == 0 && *errp == nil {
				*res = out
			}
		}})
	}
	return nil
}

// assignEach hands out one new address in each slot listed, next-fit,
// each to an owner-keyed allocation of its own (owner's next sequence
// numbers, in slot order), or none: a slot with no address free rolls
// back the addresses taken before it and the pools' next-fit cursors, so
// that the address given back is the next one handed out, as if the call
// had not happened. It does not index the keys.
func (t *table) assignEach(owner string, slots []int) ([]allocKey, []Addrs, error) {
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
	keys := make([]allocKey, 0, len(slots))
	addrs := make([]Addrs, 0, len(slots))
	for j, i := range slots {
		key := ownerKeyOf(owner, t.seq+1+uint64(j))
		as, err := t.assign(key, []int{i})
		if err != nil {
			for _, k := range keys {
				t.unassign(k)
			}
			for _, m := range marks {
				_ = m.pool.SetCursor(m.cursor) // it was the pool's cursor: inside the prefix
			}
			return nil, nil, err
		}
		keys, addrs = append(keys, key), append(addrs, as)
	}
	return keys, addrs, nil
}

// claimAddr gives key the address a: in the window of its family's pool,
// not excluded, free.
func (t *table) claimAddr(key allocKey, a netip.Addr) (Addrs, error) {
	a = a.Unmap()
	i, ok := t.slotOf(a)
	if !ok {
		return Addrs{}, fmt.Errorf("address %s: %w", a, disabledErr(a.Is6()))
	}
	b, _, inBlock := t.blockOf(a)
	switch {
	case !inBlock:
		return Addrs{}, fmt.Errorf("allocate %s: outside the pod subnets %s: %w", a, t.blockList(i), ipalloc.ErrOutOfRange)
	case !b.pool.Pool().Contains(a):
		return Addrs{}, fmt.Errorf("address %s is the %s of the pod subnet %s: %w", a, b.role(a), b.prefix, ipalloc.ErrReserved)
	}
	if owner, ex := t.excludedBy(a); ex {
		return Addrs{}, fmt.Errorf("address %s (excluded by %q): %w", a, owner, ErrExcluded)
	}
	if other, held := t.owner(a); held {
		return Addrs{}, fmt.Errorf("address %s is held by %s: %w", a, other, ipalloc.ErrTaken)
	}
	var as Addrs
	if err := b.pool.AssignAddr(key, a); err != nil {
		return Addrs{}, err
	}
	as[i] = a
	return as, nil
}

// results are the AllocationResults of as.
func (t *table) results(as Addrs, expiration string) []*AllocationResult {
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

// AllocateOwner makes the owner-keyed allocations of oa, one per address
// (see allocateOwned), as a barrier and returns once their records are
// durable: one result per address. An owner with no slots and no address
// gets one address of every family of the node.
func (k *Keeper) AllocateOwner(oa OwnerAlloc) ([]*AllocationResult, error) {
	var res []*AllocationResult
	var werr error
	err := k.exec(func(t *table, b *batch) error {
		if oa.Slots == nil && !oa.At.IsValid() {
			oa.Slots = t.allSlots()
		}
		if err := k.allocateOwned(t, b, oa, &res, &werr); err != nil {
			return err
		}
		for i := range t.slots() {
			k.checkWarm(i)
		}
		return nil
	})
	if err == nil {
		err = werr
	}
	return res, err
}

// ReleaseAddr releases the allocation that holds a, with every address
// of it, and returns those addresses once the release is durable. An
// address nobody holds is ErrNotAllocated. With a holder, only that pod's
// allocation is released: an address another pod or owner holds is
// ErrMoved, checked here, on the keeper's goroutine, in the step that
// releases. Unless force, a CNI attachment's allocation is
// ErrLiveAttachment. Refused, nothing is released.
func (k *Keeper) ReleaseAddr(a netip.Addr, force bool, holder *Holder) (Addrs, error) {
	var released Addrs
	var werr error
	err := k.exec(func(t *table, b *batch) error {
		key, err := t.releasable(a, force, holder)
		if err != nil {
			return err
		}
		as, _ := t.lookupAll(key)
		done := k.releaseDone(key, ReleaseOperator, "released by IP "+a.String(), nil)
		k.addRelease(b, key, func(o outcome, err error) {
			done(o, err)
			switch o {
			case durable:
				released = as
			case failed:
				werr = fmt.Errorf("releasing %s of %s: its record could not be deleted, it stays held: %w", a, key, err)
			default:
				werr = fmt.Errorf("releasing %s of %s: %w: %w", a, key, ErrUnknownOutcome, err)
			}
		})
		return nil
	})
	return released, errors.Join(err, werr)
}

// releasable is the allocation that a release of a may release (see
// ReleaseAddr).
func (t *table) releasable(a netip.Addr, force bool, holder *Holder) (allocKey, error) {
	key, held := t.owner(a)
	what := a.String()
	if holder != nil {
		what += " of pod " + holder.String()
	}
	switch {
	case !held || key.excluded():
		return key, fmt.Errorf("releasing %s: %w", what, ErrNotAllocated)
	case holder != nil && !holder.holds(t, key):
		by := key.String()
		if key.attachment() {
			by = describe(key, t.podOf(key))
		}
		return key, fmt.Errorf("releasing %s: %w: %s holds it", what, ErrMoved, by)
	case !force && key.attachment():
		return key, fmt.Errorf("releasing %s: %w %s: its runtime's CNI DEL or GC releases it; force releases it anyway",
			what, ErrLiveAttachment, key)
	}
	return key, nil
}

// Holder is the pod a conditional release expects to hold the address:
// its name, and its UID when known ("": any UID of the name).
type Holder struct {
	Pod podmodel.ID
	UID string
}

func (h Holder) String() string {
	if h.UID == "" {
		return h.Pod.String()
	}
	return h.Pod.String() + " (UID " + h.UID + ")"
}

// holds tells whether allocation key is h's: the pod's name, and its UID
// unless either is unknown.
func (h Holder) holds(t *table, key allocKey) bool {
	uid := t.uids[key]
	return t.podOf(key) == h.Pod && (h.UID == "" || uid == "" || uid == h.UID)
}

// ReleaseOwner releases every allocation of an owner name, and when the
// name is a pod's ("namespace/name") every allocation of that pod. An
// owner with none is ErrNotAllocated. Unless force, an owner holding a
// CNI attachment is refused with ErrLiveAttachment and nothing is
// released: a name is no evidence that the pod is gone.
func (k *Keeper) ReleaseOwner(owner string, force bool) error {
	var failed error
	err := k.exec(func(t *table, b *batch) error {
		keys := t.ownerKeys(owner)
		if len(keys) == 0 {
			return fmt.Errorf("releasing the addresses of owner %q: %w", owner, ErrNotAllocated)
		}
		if !force {
			var live []string
			for _, key := range keys {
				if key.attachment() {
					live = append(live, key.String())
				}
			}
			if len(live) > 0 {
				return fmt.Errorf("releasing the addresses of owner %q: %w %s: its runtime's CNI DEL or GC releases it; force releases it anyway",
					owner, ErrLiveAttachment, strings.Join(live, ", "))
			}
		}
		for _, key := range keys {
			done := k.releaseDone(key, ReleaseOperator, "released by owner "+owner, nil)
			k.addRelease(b, key, func(o outcome, err error) {
				done(o, err)
				if o != durable && failed == nil {
					failed = fmt.Errorf("releasing %s of owner %q: %w", key, owner, err)
				}
			})
		}
		return nil
	})
	return errors.Join(err, failed)
}

// FamilySlot is the slot of family f on a node of st (ErrIPv4Disabled,
// ErrIPv6Disabled when it has none).
func FamilySlot(st *addressing.State, f Family) (int, error) {
	return (&table{st: st}).familySlot(f)
}

// MaxOwnerLen bounds an owner name, in bytes.
const MaxOwnerLen = 256

// CheckOwner says what is wrong with an owner name: empty, too long, not
// UTF-8, a character that is not printable, or an address (the owner of
// a release by owner must not read as a release by address).
func CheckOwner(s string) error {
	switch {
	case s == "":
		return errors.New("is empty: want the owner's name")
	case len(s) > MaxOwnerLen:
		return fmt.Errorf("is longer than %d bytes", MaxOwnerLen)
	case !utf8.ValidString(s):
		return errors.New("is not UTF-8")
	case strings.IndexFunc(s, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0:
		return errors.New("has a character that is not printable")
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return errors.New("is an IP address: want a name (release by address with \"ip\")")
	}
	return nil
}
