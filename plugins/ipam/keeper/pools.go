package keeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/contiv-ipam/agent/engine/cidr"
	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// BlocksKey holds the pod subnets added to this node (AddPool), in the
// order they are tried: JSON ["10.2.0.0/26", ...]. The subnet cut from
// the node ID is not in it.
const BlocksKey = "/contiv-agent/ipam/blocks"

// Errors of the pool calls that callers branch on.
var (
	// ErrPoolInUse: RemovePool without force of a pool with assigned
	// addresses.
	ErrPoolInUse = errors.New("the pool has assigned addresses")
	// ErrNoSuchPool: the node has no pool of that prefix.
	ErrNoSuchPool = errors.New("no such pool on this node")
)

// AddPool adds a pod subnet to this node (the AWS datastore's AddENI, a
// block that nodeipam granted): its addresses are handed out once the
// blocks before it are full. It must be of a family of the node and
// overlap none of its pod subnets: a pool the node has already is
// ErrDuplicatePool. The pool list is durable when it returns, and a
// restart keeps it.
func (k *Keeper) AddPool(prefix netip.Prefix) error { return k.addPool(prefix, false) }

// addPool adds the pool of prefix, without any of its addresses when
// empty (AddEmptyPool).
func (k *Keeper) addPool(prefix netip.Prefix, empty bool) error {
	if !prefix.IsValid() {
		return fmt.Errorf("adding a pool: invalid prefix %q", prefix)
	}
	prefix = prefix.Masked()
	return k.exec(func(t *table, _ *batch) error {
		if t.externalMode() {
			return fmt.Errorf("adding pool %s: %w", prefix, ErrExternalIPAM)
		}
		i, ok := t.slotOf(prefix.Addr())
		if !ok {
			return fmt.Errorf("adding pool %s: %w", prefix, disabledErr(prefix.Addr().Is6()))
		}
		for j, b := range t.blocks[i] {
			switch {
			case b.prefix == prefix && j == 0:
				return fmt.Errorf("adding pool %s: it is the pod subnet cut from the node ID: %w", prefix, ErrDuplicatePool)
			case b.prefix == prefix:
				return fmt.Errorf("adding pool %s: %w", prefix, ErrDuplicatePool)
			case b.prefix.Overlaps(prefix):
				return fmt.Errorf("adding pool %s: it overlaps the pod subnet %s of this node", prefix, b.prefix)
			}
		}
		b, err := newBlock(prefix)
		if err != nil {
			return fmt.Errorf("adding pool %s: %w", prefix, err)
		}
		// What a pool of this prefix left in the store goes; an empty
		// pool's addresses are stored before the pool list that makes
		// them count.
		ws := k.unlistedDeletes(t, prefix)
		var out []netip.Addr
		if empty {
			for a := prefix.Addr(); a.IsValid() && prefix.Contains(a); a = a.Next() {
				if b.pool.Pool().Contains(a) {
					out = append(out, a)
					ws = append(ws, write{op: kvdb.PutOp(unlistedKey(a), []byte(prefix.String())), done: k.logFailed("adding empty pool " + prefix.String())})
				}
			}
		}
		if err := k.commitInOrder(append(ws, k.blocksWrite(append(t.added(), prefix)))); err != nil {
			return fmt.Errorf("adding pool %s: %w", prefix, err)
		}
		t.blocks[i] = append(t.blocks[i], b)
		k.excludeIn(t, b)
		for _, a := range out {
			t.unlist(a)
		}
		k.log.Info("pod address pool added", "pool", prefix.String(), "pools", t.blockList(i), "empty", empty)
		return nil
	})
}

// RemovePool removes a pool added by AddPool (the AWS datastore's
// RemoveENIFromDataStore). A pool with assigned addresses is refused
// (ErrPoolInUse) unless force: then every allocation holding an address
// of it is released (all of its addresses), each logged, and the names
// of the released allocations are returned. Its cooling, excluded and
// out-of-pool addresses (DelPoolAddress) go with it. The subnet cut from
// the node ID cannot be removed.
func (k *Keeper) RemovePool(prefix netip.Prefix, force bool) (released []string, err error) {
	prefix = prefix.Masked()
	err = k.exec(func(t *table, _ *batch) error {
		i, j, ok := t.findBlock(prefix)
		switch {
		case !ok:
			return fmt.Errorf("removing pool %s: %w", prefix, ErrNoSuchPool)
		case j == 0:
			return fmt.Errorf("removing pool %s: it is the pod subnet cut from the node ID, which stays", prefix)
		}
		keys := t.keysIn(t.blocks[i][j])
		if len(keys) > 0 && !force {
			return fmt.Errorf("removing pool %s: %d allocations hold addresses of it: %w", prefix, len(keys), ErrPoolInUse)
		}
		// Its records go first, the pool list without it last, in one
		// transaction when they fit: no record is ever stored outside
		// the stored pools.
		var ws []write
		for _, key := range keys {
			as, _ := t.lookupAll(key)
			released = append(released, fmt.Sprintf("%s %s", describe(key, t.podOf(key)), as))
			k.log.Warn("pool removed with force: allocation released", "pool", prefix.String(), "key", key.String(),
				"pod", t.podOf(key).String(), "ip", as.String())
			ws = append(ws, write{op: kvdb.DeleteOp(key.storeKey()), done: k.releaseDone(key, ReleasePool, "released with its pool", nil)})
		}
		if err := k.dropPool(t, i, j, ws); err != nil {
			return fmt.Errorf("removing pool %s: %w", prefix, err)
		}
		k.log.Info("pod address pool removed", "pool", prefix.String(), "released", len(keys))
		return nil
	})
	return released, err
}

// FreeableIPs lists the addresses of a pool that can be handed out now:
// neither assigned, cooling down nor excluded (the AWS datastore's
// FreeableIPs, per pool).
func (k *Keeper) FreeableIPs(prefix netip.Prefix) (free []netip.Addr, err error) {
	prefix = prefix.Masked()
	err = k.exec(func(t *table, _ *batch) error {
		i, j, ok := t.findBlock(prefix)
		if !ok {
			return fmt.Errorf("pool %s: %w", prefix, ErrNoSuchPool)
		}
		pool := t.blocks[i][j].pool.Pool()
		if cidr.HostBits(prefix) > maxExcludedBits {
			return fmt.Errorf("pool %s has more than 2^%d addresses: read its counts in Stats instead", prefix, maxExcludedBits)
		}
		for a := pool.AddrAt(0); a.IsValid() && prefix.Contains(a); a = a.Next() {
			if pool.Contains(a) && !pool.IsAllocated(a) {
				free = append(free, a)
			}
		}
		return nil
	})
	return free, err
}

// PodIPInfo is one allocated address (the AWS datastore's
// AllocatedIPs).
type PodIPInfo struct {
	Key  string
	Pod  podmodel.ID
	IP   netip.Addr
	Pool netip.Prefix
}

// AllocatedIPs lists every allocated address with its allocation, pod
// and pool.
func (k *Keeper) AllocatedIPs() (out []PodIPInfo, err error) {
	err = k.exec(func(t *table, _ *batch) error {
		t.each(func(k allocKey, pod podmodel.ID, as Addrs) bool {
			for _, a := range as.List() {
				info := PodIPInfo{Key: k.String(), Pod: pod, IP: a}
				if b, _, ok := t.blockOf(a); ok {
					info.Pool = b.prefix
				}
				out = append(out, info)
			}
			return true
		})
		return nil
	})
	return out, err
}

// findBlock finds the block of prefix: its slot and index.
func (t *table) findBlock(prefix netip.Prefix) (int, int, bool) {
	for i, bs := range t.blocks {
		for j, b := range bs {
			if b.prefix == prefix {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// added lists the blocks added to the node (not those cut from its node
// ID), in the order they are tried.
func (t *table) added() []netip.Prefix {
	var out []netip.Prefix
	for _, bs := range t.blocks {
		for j, b := range bs {
			if j > 0 {
				out = append(out, b.prefix)
			}
		}
	}
	return out
}

// keysIn lists the allocations that hold an address of b.
func (t *table) keysIn(b *block) []allocKey {
	var keys []allocKey
	b.pool.Range(func(k allocKey, _ netip.Addr) bool {
		if !k.excluded() && !k.cooling() {
			keys = append(keys, k)
		}
		return true
	})
	return keys
}

// dropBlock forgets block j of slot i with its cooling and excluded
// addresses (no allocation holds one of its addresses any more).
func (t *table) dropBlock(i, j int) {
	b := t.blocks[i][j]
	for a := range t.cool.until {
		if b.prefix.Contains(a) {
			delete(t.cool.until, a)
		}
	}
	for a := range t.excl.owners {
		if b.prefix.Contains(a) {
			delete(t.excl.owners, a)
		}
	}
	t.blocks[i] = slices.Delete(slices.Clone(t.blocks[i]), j, j+1)
}

// storeBlocks stores the list of added blocks, by the outcome rules of
// every write (the caller is a barrier: nothing is in flight). The
// caller changes the blocks in memory only once it is durable, so that
// every stored record lies in a stored block: a block is stored before
// anything is allocated from it, and removed only after its records.
// Without a store, memory is the store.
func (k *Keeper) storeBlocks(list []netip.Prefix) error {
	return k.commitInOrder([]write{k.blocksWrite(list)})
}

// blocksWrite is the write of the pool list.
func (k *Keeper) blocksWrite(list []netip.Prefix) write {
	v, _ := json.Marshal(list)
	return write{op: kvdb.PutOp(BlocksKey, v), done: func(o outcome, err error) {
		if o != durable {
			k.log.Warn("storing the pool list failed", "key", BlocksKey, "pools", string(v), "error", err)
		}
	}}
}

// restoreBlocks adds the stored blocks to a new table; a block that does
// not fit (another family, an overlap, unreadable) is logged and left out.
func (k *Keeper) restoreBlocks(t *table) {
	if t.externalMode() {
		return
	}
	for _, pfx := range k.loadBlocks() {
		i, ok := t.slotOf(pfx.Addr())
		if !ok {
			k.log.Warn("stored pool not restored: this node has no pod subnet of its family", "pool", pfx.String())
			continue
		}
		if slices.ContainsFunc(t.blocks[i], func(b *block) bool { return b.prefix.Overlaps(pfx) }) {
			k.log.Warn("stored pool not restored: it overlaps a pod subnet of this node", "pool", pfx.String(), "pools", t.blockList(i))
			continue
		}
		b, err := newBlock(pfx)
		if err != nil {
			k.log.Warn("stored pool not restored", "pool", pfx.String(), "error", err)
			continue
		}
		t.blocks[i] = append(t.blocks[i], b)
	}
	k.restoreUnlisted(t)
}

// loadBlocks reads the stored list of added blocks; in memory mode the
// current table's.
func (k *Keeper) loadBlocks() []netip.Prefix {
	if k.db == nil {
		if k.tab == nil {
			return nil
		}
		return k.tab.added()
	}
	ctx, cancel := k.ctx()
	defer cancel()
	kv, found, err := k.db.Get(ctx, BlocksKey)
	if err != nil || !found {
		if err != nil {
			k.log.Warn("reading the pool list failed; only the node's own pod subnets are used", "key", BlocksKey, "error", err)
		}
		return nil
	}
	var list []netip.Prefix
	if err := json.Unmarshal(kv.Value, &list); err != nil {
		k.log.Warn("the pool list does not parse; only the node's own pod subnets are used", "key", BlocksKey, "value", string(kv.Value), "error", err)
		return nil
	}
	return list
}

// excludeIn applies the exclusions of the last resync to a new block.
func (k *Keeper) excludeIn(t *table, b *block) {
	if k.last == nil {
		return
	}
	for _, e := range k.last.Exclusions {
		if _, err := t.excludeIn(b, e.Prefix.Masked(), e.Owner); err != nil {
			k.log.Warn("exclusion not applied", "error", err)
		}
	}
}
