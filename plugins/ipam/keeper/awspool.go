package keeper

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/contiv-ipam/agent/engine/cidr"
	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/infra/kvdb"
)

// Pools whose addresses come one by one (the AWS datastore's ENIs with
// their secondary addresses): an added pool is a prefix, and every address
// of its window is in it unless deleted (DelPoolAddress); a pool added
// empty (AddEmptyPool) has none until AddPoolAddress adds them.
//
// An address that is not in its pool is held in the pool by an exclusion
// whose owner starts with unlistedOwner, so that next-fit skips it, the
// free count leaves it out and Stats counts it as excluded; when the
// address was excluded already (ipamConfig.excludeIPs, a local route, an
// exclusion made at run time), the owner keeps that exclusion's owner so
// that adding the address back leaves it excluded. Each such address is
// stored (UnlistedPrefix), so that a restart keeps the pool as it was;
// the node's own pod subnet (cut from the node ID) always has all its
// addresses.

// UnlistedPrefix keeps the addresses that are not in their pool:
// UnlistedPrefix + "<ip>" -> the pool's prefix.
const UnlistedPrefix = "/contiv-agent/ipam/unlisted/"

func unlistedKey(a netip.Addr) string { return UnlistedPrefix + a.String() }

// unlistedOwner is the exclusion owner of an address that is not in its
// pool; alsoExcluded introduces the owner of an exclusion it had before.
const (
	unlistedOwner = "not in its pool (DelPoolAddress, AddEmptyPool)"
	alsoExcluded  = "; also excluded by "
)

// maxEmptyPoolBits bounds a pool added empty: each of its addresses is
// stored until added.
const maxEmptyPoolBits = 12

// Errors of the per-address calls that callers branch on.
var (
	// ErrDuplicatePool: AddPool of a pool the node has already.
	ErrDuplicatePool = errors.New("the node has this pool already")
	// ErrAddressInPool: AddPoolAddress of an address its pool has
	// already.
	ErrAddressInPool = errors.New("the address is in its pool already")
	// ErrAddressNotInPool: DelPoolAddress of an address its pool does
	// not have (deleted already, or never added to a pool added empty).
	ErrAddressNotInPool = errors.New("the address is not in its pool")
	// ErrAddressInUse: DelPoolAddress without force of an address an
	// allocation holds.
	ErrAddressInUse = errors.New("the address is assigned")
)

// unlisted tells whether owner is the exclusion owner of an address that
// is not in its pool, and the owner of the exclusion it had before
// (excluded false: none).
func unlisted(owner string) (prev string, excluded, ok bool) {
	rest, ok := strings.CutPrefix(owner, unlistedOwner)
	if !ok {
		return "", false, false
	}
	prev, excluded = strings.CutPrefix(rest, alsoExcluded)
	return prev, excluded, true
}

// isUnlisted tells whether a is not in its pool.
func (t *table) isUnlisted(a netip.Addr) bool {
	owner, ok := t.excl.owners[a]
	if !ok {
		return false
	}
	_, _, ok = unlisted(owner)
	return ok
}

// unlist takes a out of its pool. No allocation holds it; it may be
// free, cooling down or excluded.
func (t *table) unlist(a netip.Addr) {
	p := t.poolOf(a)
	owner := unlistedOwner
	if prev, ok := t.excl.owners[a]; ok {
		owner += alsoExcluded + prev
		if k, held := p.Owner(a); held && k.excluded() {
			p.Unassign(k)
		}
	}
	if _, cooling := t.cool.until[a]; cooling {
		t.unCool(a)
	}
	t.excl.owners[a] = owner
	t.takeExcluded(a)
}

// relist puts a back in its pool: free, or excluded again when it was
// excluded before it left, or when an exclusion of the last resync covers
// it (one made while it was out of its pool).
func (k *Keeper) relist(t *table, a netip.Addr) {
	p := t.poolOf(a)
	prev, excluded, _ := unlisted(t.excl.owners[a])
	if key, held := p.Owner(a); held && key.excluded() {
		p.Unassign(key)
	}
	delete(t.excl.owners, a)
	if !excluded && k.last != nil {
		for _, e := range k.last.Exclusions {
			if e.Prefix.Masked().Contains(a) {
				prev, excluded = e.Owner, true
				break
			}
		}
	}
	if excluded {
		t.excl.owners[a] = prev
		t.takeExcluded(a)
	}
}

// addedBlock finds the added block of prefix and checks that a is an
// address of its window; what names the call in errors.
func (t *table) addedBlock(what string, prefix netip.Prefix, a netip.Addr) (*block, error) {
	if t.externalMode() {
		return nil, fmt.Errorf("%s: %w", what, ErrExternalIPAM)
	}
	i, j, ok := t.findBlock(prefix)
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: pool %s: %w", what, prefix, ErrNoSuchPool)
	case j == 0:
		return nil, fmt.Errorf("%s: %s is the pod subnet cut from the node ID, which has all its addresses", what, prefix)
	}
	b := t.blocks[i][j]
	switch {
	case !a.IsValid() || !prefix.Contains(a):
		return nil, fmt.Errorf("%s: %s is outside the pool %s: %w", what, a, prefix, ipalloc.ErrOutOfRange)
	case !b.pool.Pool().Contains(a):
		return nil, fmt.Errorf("%s: %s is the %s of the pool %s, never handed out: %w", what, a, b.role(a), prefix, ipalloc.ErrReserved)
	}
	return b, nil
}

// AddEmptyPool adds a pod subnet to this node as AddPool does, but with
// none of its addresses (the AWS datastore's AddENI): AddPoolAddress adds
// them one by one. It may have at most 2^12 addresses.
func (k *Keeper) AddEmptyPool(prefix netip.Prefix) error {
	if prefix.IsValid() && cidr.HostBits(prefix.Masked()) > maxEmptyPoolBits {
		return fmt.Errorf("adding empty pool %s: it has more than 2^%d addresses, each stored until added: add it whole (AddPool) and delete what it must not hand out", prefix.Masked(), maxEmptyPoolBits)
	}
	return k.addPool(prefix, true)
}

// AddPoolAddress adds address a to the added pool of prefix (the AWS
// datastore's AddIPv4AddressToStore): an address deleted from it, or one
// of a pool added empty. It is handed out once the pool's turn comes,
// unless an exclusion covers it. The change is durable when it returns.
// Errors: ErrNoSuchPool; ipalloc.ErrOutOfRange (outside the prefix) or
// ipalloc.ErrReserved (its network address, gateway, NAT loopback or
// broadcast); ErrAddressInPool (it is in the pool already).
func (k *Keeper) AddPoolAddress(prefix netip.Prefix, a netip.Addr) error {
	prefix, a = prefix.Masked(), a.Unmap()
	what := fmt.Sprintf("adding %s to pool %s", a, prefix)
	return k.exec(func(t *table, _ *batch) error {
		if _, err := t.addedBlock(what, prefix, a); err != nil {
			return err
		}
		if !t.isUnlisted(a) {
			return fmt.Errorf("%s: %w", what, ErrAddressInPool)
		}
		if err := k.commitInOrder([]write{{op: kvdb.DeleteOp(unlistedKey(a)), done: k.logFailed(what)}}); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		k.relist(t, a)
		k.log.Info("address added to its pool", "pool", prefix.String(), "ip", a.String())
		return nil
	})
}

// DelPoolAddress deletes address a from the added pool of prefix (the
// AWS datastore's DelIPv4AddressFromStore): it is not handed out until
// AddPoolAddress adds it back. An address an allocation holds is refused
// (ErrAddressInUse) unless force: then that allocation is released (all
// of its addresses), logged, and named in the result. A cooling address
// is deleted at once. The change is durable when it returns. Errors as
// AddPoolAddress's, and ErrAddressNotInPool (it is not in the pool).
func (k *Keeper) DelPoolAddress(prefix netip.Prefix, a netip.Addr, force bool) (released []string, err error) {
	prefix, a = prefix.Masked(), a.Unmap()
	what := fmt.Sprintf("deleting %s from pool %s", a, prefix)
	err = k.exec(func(t *table, _ *batch) error {
		if _, err := t.addedBlock(what, prefix, a); err != nil {
			return err
		}
		if t.isUnlisted(a) {
			return fmt.Errorf("%s: %w", what, ErrAddressNotInPool)
		}
		var ws []write
		if key, held := t.owner(a); held {
			as, _ := t.lookupAll(key)
			if !force {
				return fmt.Errorf("%s: %s holds %s: %w", what, describe(key, t.podOf(key)), as, ErrAddressInUse)
			}
			released = append(released, fmt.Sprintf("%s %s", describe(key, t.podOf(key)), as))
			k.log.Warn("pool address deleted with force: allocation released", "pool", prefix.String(), "ip", a.String(),
				"key", key.String(), "pod", t.podOf(key).String(), "ips", as.String())
			ws = append(ws, write{op: kvdb.DeleteOp(key.storeKey()), done: k.releaseDone(key, ReleasePool, "released with its pool address", nil)})
		}
		// The record goes first, in the same transaction: no stored
		// record ever holds an address out of its pool.
		ws = append(ws, write{op: kvdb.PutOp(unlistedKey(a), []byte(prefix.String())), done: k.logFailed(what)})
		if err := k.commitInOrder(ws); err != nil {
			released = nil
			return fmt.Errorf("%s: %w", what, err)
		}
		t.unlist(a)
		k.log.Info("address deleted from its pool", "pool", prefix.String(), "ip", a.String(), "released", len(released))
		return nil
	})
	return released, err
}

// PoolAddresses lists the addresses of the added pool of prefix, in
// order (the AWS datastore's GetENIIPs): those handed out, free, cooling
// down or excluded; not those deleted or never added.
func (k *Keeper) PoolAddresses(prefix netip.Prefix) (out []netip.Addr, err error) {
	prefix = prefix.Masked()
	err = k.exec(func(t *table, _ *batch) error {
		i, j, ok := t.findBlock(prefix)
		if !ok {
			return fmt.Errorf("pool %s: %w", prefix, ErrNoSuchPool)
		}
		if cidr.HostBits(prefix) > maxExcludedBits {
			return fmt.Errorf("pool %s has more than 2^%d addresses: read its counts in Stats instead", prefix, maxExcludedBits)
		}
		pool := t.blocks[i][j].pool.Pool()
		for a := prefix.Addr(); a.IsValid() && prefix.Contains(a); a = a.Next() {
			if pool.Contains(a) && !t.isUnlisted(a) {
				out = append(out, a)
			}
		}
		return nil
	})
	return out, err
}

// RemoveUnusedPool removes one added pool that nothing uses (the AWS
// datastore's RemoveUnusedENIFromStore): no address of it assigned or
// cooling down, and without it its family keeps at least warmTarget
// addresses free or cooling down and minimumTarget addresses in all (0:
// no bound), counted over its other pools (the node's own subnet
// included), excluded addresses left out. Of several, the one added last
// goes. It returns the pool removed, or the zero prefix when none could
// be; the pool list is durable when it returns.
func (k *Keeper) RemoveUnusedPool(warmTarget, minimumTarget int) (removed netip.Prefix, err error) {
	err = k.exec(func(t *table, _ *batch) error {
		if t.externalMode() {
			return nil
		}
		for i := range t.slots() {
			var warm, all uint64
			for _, b := range t.blocks[i] {
				s := t.blockStats(b)
				warm += s.Free + s.Cooldown
				all += s.Free + s.Cooldown + s.Assigned
			}
			for j := len(t.blocks[i]) - 1; j > 0; j-- {
				b := t.blocks[i][j]
				s := t.blockStats(b)
				if s.Assigned > 0 || s.Cooldown > 0 || warm-s.Free < uint64(warmTarget) || all-s.Free < uint64(minimumTarget) {
					continue
				}
				if err := k.dropPool(t, i, j, nil); err != nil {
					return fmt.Errorf("removing unused pool %s: %w", b.prefix, err)
				}
				removed = b.prefix
				k.log.Info("unused pod address pool removed", "pool", b.prefix.String(), "warm-target", warmTarget, "minimum-target", minimumTarget)
				return nil
			}
		}
		return nil
	})
	return removed, err
}

// dropPool stores the removal of added block j of slot i with the
// deletes of ws (records, first) and forgets it once durable.
func (k *Keeper) dropPool(t *table, i, j int, ws []write) error {
	b := t.blocks[i][j]
	rest := slices.DeleteFunc(t.added(), func(q netip.Prefix) bool { return q == b.prefix })
	ws = append(ws, k.blocksWrite(rest))
	ws = append(ws, k.unlistedDeletes(t, b.prefix)...)
	if err := k.commitInOrder(ws); err != nil {
		return err
	}
	t.dropBlock(i, j)
	return nil
}

// unlistedDeletes are the deletes of the stored addresses of prefix that
// are not in their pool: those of t's block, and any other the store
// holds (left by a pool given back).
func (k *Keeper) unlistedDeletes(t *table, prefix netip.Prefix) []write {
	seen := map[netip.Addr]bool{}
	for a, owner := range t.excl.owners {
		if _, _, ok := unlisted(owner); ok && prefix.Contains(a) {
			seen[a] = true
		}
	}
	for _, a := range k.storedUnlisted() {
		if prefix.Contains(a) {
			seen[a] = true
		}
	}
	var ws []write
	for a := range seen {
		ws = append(ws, write{op: kvdb.DeleteOp(unlistedKey(a)), done: k.logFailed("deleting the stored out-of-pool address " + a.String())})
	}
	slices.SortFunc(ws, func(x, y write) int { return strings.Compare(x.op.Key, y.op.Key) })
	return ws
}

// storedUnlisted reads the stored addresses that are not in their pool;
// none in memory mode (the table is the store).
func (k *Keeper) storedUnlisted() []netip.Addr {
	if k.db == nil {
		return nil
	}
	ctx, cancel := k.ctx()
	defer cancel()
	kvs, _, err := k.db.List(ctx, UnlistedPrefix)
	if err != nil {
		k.log.Warn("reading the out-of-pool addresses failed", "prefix", UnlistedPrefix, "error", err)
		return nil
	}
	var out []netip.Addr
	for _, kv := range kvs {
		if a, err := netip.ParseAddr(strings.TrimPrefix(kv.Key, UnlistedPrefix)); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// restoreUnlisted takes the stored out-of-pool addresses out of the added
// blocks of a new table (before the records are claimed: a record that
// holds one is moved aside). One outside every added block, or stored for
// another pool than the block that holds it now, is left alone: adding a
// pool deletes the stored ones of its prefix first. In memory mode the
// current table's are kept.
func (k *Keeper) restoreUnlisted(t *table) {
	type entry struct {
		a    netip.Addr
		pool string
	}
	var list []entry
	if k.db == nil {
		if k.tab != nil {
			for a, owner := range k.tab.excl.owners {
				if _, _, ok := unlisted(owner); ok {
					if b, _, in := k.tab.blockOf(a); in {
						list = append(list, entry{a, b.prefix.String()})
					}
				}
			}
		}
	} else {
		ctx, cancel := k.ctx()
		defer cancel()
		kvs, _, err := k.db.List(ctx, UnlistedPrefix)
		if err != nil {
			k.log.Warn("reading the out-of-pool addresses failed: the added pools have all their addresses", "prefix", UnlistedPrefix, "error", err)
			return
		}
		for _, kv := range kvs {
			a, err := netip.ParseAddr(strings.TrimPrefix(kv.Key, UnlistedPrefix))
			if err != nil {
				k.log.Warn("ignoring an unreadable out-of-pool address", "key", kv.Key)
				continue
			}
			list = append(list, entry{a, string(kv.Value)})
		}
	}
	for _, e := range list {
		b, _, ok := t.blockOf(e.a)
		if !ok || b == t.blocks[0][0] || len(t.blocks[1]) > 0 && b == t.blocks[1][0] || b.prefix.String() != e.pool || !b.pool.Pool().Contains(e.a) {
			k.log.Debug("stored out-of-pool address left alone: no added pool of its own holds it", "ip", e.a.String(), "pool", e.pool)
			continue
		}
		if !t.isUnlisted(e.a) {
			t.unlist(e.a)
		}
	}
}

// logFailed logs a write of what that was not applied.
func (k *Keeper) logFailed(what string) func(outcome, error) {
	return func(o outcome, err error) {
		if o != durable {
			k.log.Warn(what+": storing it failed", "error", err)
		}
	}
}
