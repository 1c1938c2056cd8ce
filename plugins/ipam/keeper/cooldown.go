package keeper

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// cooldownNamespace is the pod namespace of the keys that hold released
// addresses through their cooldown.
const cooldownNamespace = "_cooldown"

// cooldowns are the released addresses that are not handed out again
// before their time is up (Config.AddressCooldown; the AWS datastore's
// cooldown): a container that crash-loops does not get the address of
// its predecessor, which peers may still route to. Each is held in its
// pool by a key of its own, so that next-fit skips it and the free count
// leaves it out, and is freed by the sweep once its time is up. Each is
// also stored (CoolingPrefix), in the transaction that deletes the record
// releasing it, so that a restart keeps the cooldown; the sweep deletes
// the stored ones that no longer cool down.
type cooldowns struct {
	until map[netip.Addr]time.Time
	seq   uint64
	// reused counts the addresses handed out before their cooldown
	// ended (no other was free).
	reused uint64
}

func newCooldowns() cooldowns { return cooldowns{until: map[netip.Addr]time.Time{}} }

// coolKey is the key that holds address a of slot i through its
// cooldown.
func (t *table) coolKey() allocKey {
	t.cool.seq++
	return allocKey{pod: podmodel.ID{Namespace: cooldownNamespace}, seq: t.cool.seq}
}

// cooling tells whether k holds an address through its cooldown.
func (k allocKey) cooling() bool { return k.seq != 0 && k.pod.Namespace == cooldownNamespace }

// coolDown holds the addresses just released until until; an excluded
// one is excluded instead.
func (t *table) coolDown(as Addrs, until time.Time) {
	for _, a := range as {
		p := t.poolOf(a)
		if !a.IsValid() || p == nil {
			continue
		}
		if _, ex := t.excl.owners[a]; ex {
			t.takeExcluded(a)
			continue
		}
		if p.AssignAddr(t.coolKey(), a) == nil {
			t.cool.until[a] = until
		}
	}
}

// release forgets a released allocation: its addresses cool down until
// now+d (d 0: free at once).
func (t *table) release(k allocKey, now time.Time, d time.Duration) {
	if d <= 0 || t.externalMode() {
		t.drop(k)
		return
	}
	if as, ok := t.forget(k); ok {
		t.coolDown(as, now.Add(d))
	}
}

// warmUp frees the addresses whose cooldown is over by now and returns
// how many.
func (t *table) warmUp(now time.Time) int {
	n := 0
	for a, until := range t.cool.until {
		if now.Before(until) {
			continue
		}
		t.unCool(a)
		n++
	}
	return n
}

// unCool frees a cooling address.
func (t *table) unCool(a netip.Addr) {
	delete(t.cool.until, a)
	if p := t.poolOf(a); p != nil {
		if k, held := p.Owner(a); held && k.cooling() {
			p.Unassign(k)
		}
	}
}

// earliestWarm is when the first cooldown ends, zero when none runs.
func (t *table) earliestWarm() time.Time {
	var first time.Time
	for _, until := range t.cool.until {
		if first.IsZero() || until.Before(first) {
			first = until
		}
	}
	return first
}

// coolestOf is the address of slot i whose cooldown ends first, false
// when none of the slot's cools down: a pool with no free address hands
// it out rather than fail the allocation.
func (t *table) coolestOf(i int) (netip.Addr, bool) {
	var best netip.Addr
	var at time.Time
	for a, until := range t.cool.until {
		if j, ok := t.slotOf(a); !ok || j != i {
			continue
		}
		if !best.IsValid() || until.Before(at) || until.Equal(at) && a.Less(best) {
			best, at = a, until
		}
	}
	return best, best.IsValid()
}

// coolingCount is the number of addresses of slot i in their cooldown.
func (t *table) coolingCount(i int) int {
	n := 0
	for a := range t.cool.until {
		if j, ok := t.slotOf(a); ok && j == i {
			n++
		}
	}
	return n
}

// servable is the number of addresses of slot i an allocation can get:
// the free ones and the cooling ones (handed out when nothing else is
// free), outside revoked blocks.
func (t *table) servable(i int) uint64 {
	n := t.free(i)
	for a := range t.cool.until {
		if b, j, ok := t.blockOf(a); ok && j == i && !b.revoked {
			n++
		}
	}
	return n
}

// CoolingPrefix keeps the released addresses through their cooldown:
// CoolingPrefix + "<ip>" -> the end of its cooldown (RFC 3339, UTC).
const CoolingPrefix = "/contiv-agent/ipam/cooling/"

func coolingKey(a netip.Addr) string { return CoolingPrefix + a.String() }

// releaseWrites are the writes that release allocation key of t: the
// delete of its record (its done is done) and, with an address cooldown,
// the cooling record of each of its addresses, in the same transaction.
func (k *Keeper) releaseWrites(t *table, key allocKey, done func(outcome, error)) []write {
	ws := []write{{op: kvdb.DeleteOp(key.storeKey()), done: done}}
	if k.cfg.AddressCooldown <= 0 || t.externalMode() {
		return ws
	}
	as, _ := t.lookupAll(key)
	until := []byte(k.clock.Now().Add(k.cfg.AddressCooldown).UTC().Format(time.RFC3339Nano))
	for _, a := range as.List() {
		if t.poolOf(a) == nil {
			continue
		}
		ws = append(ws, write{op: kvdb.PutOp(coolingKey(a), until), done: func(o outcome, _ error) {
			if o != failed {
				k.coolStored[a] = struct{}{} // unknown: it may be stored
			}
		}})
	}
	return ws
}

// addRelease adds the release writes of key to b.
func (k *Keeper) addRelease(b *batch, key allocKey, done func(outcome, error)) {
	for _, w := range k.releaseWrites(k.tab, key, done) {
		b.add(w)
	}
}

// coolingLane is the lane of the deletes of stored cooling records: no
// request's.
var coolingLane = podmodel.ID{Namespace: cooldownNamespace, Name: "records"}

// warmUp frees the addresses whose cooldown is over (the sweep) and
// deletes the stored cooling records of the addresses that no longer cool
// down (warmed up, handed out early, gone with their pool). The deletes
// are harmless whenever they land, so they go to the store like a
// request's writes, without holding the sweep; one that fails is tried
// again at the next sweep.
func (k *Keeper) warmUp() {
	t := k.tab
	t.warmUp(k.clock.Now())
	b := newBatch()
	for a := range k.coolStored {
		if _, cooling := t.cool.until[a]; cooling || k.coolDeleting[a] {
			continue
		}
		if len(b.writes) >= kvdb.MaxTxnOps {
			k.sendBatch(b, nil, coolingLane)
			b = newBatch()
		}
		k.coolDeleting[a] = true
		b.add(write{op: kvdb.DeleteOp(coolingKey(a)), done: func(o outcome, _ error) {
			delete(k.coolDeleting, a)
			if o == durable {
				delete(k.coolStored, a)
			}
		}})
	}
	if len(b.writes) > 0 {
		k.sendBatch(b, nil, coolingLane)
	}
}

// restoreCooling puts the stored cooldowns that still run back on t's
// free addresses; the others (over, or on an address held or outside the
// pools) are deleted with the resync's writes.
func (k *Keeper) restoreCooling(p *plan, cooling []kvdb.KeyValue) {
	now := k.clock.Now()
	k.coolStored = map[netip.Addr]struct{}{}
	for _, kv := range cooling {
		a, err := netip.ParseAddr(strings.TrimPrefix(kv.Key, CoolingPrefix))
		until, terr := time.Parse(time.RFC3339Nano, string(kv.Value))
		_, held := p.t.owner(a)
		if err != nil || terr != nil || !until.After(now) || held || p.t.poolOf(a) == nil || p.t.poolOf(a).Pool().IsAllocated(a) {
			p.stale = append(p.stale, kv.Key)
			continue
		}
		p.t.coolDown(Addrs{a}, until)
		k.coolStored[a] = struct{}{}
	}
}

// loadCooling reads the stored cooldowns; in memory mode, the current
// table's.
func (k *Keeper) loadCooling() ([]kvdb.KeyValue, error) {
	if k.db == nil {
		var out []kvdb.KeyValue
		if k.tab != nil {
			for a, until := range k.tab.cool.until {
				out = append(out, kvdb.KeyValue{Key: coolingKey(a), Value: []byte(until.UTC().Format(time.RFC3339Nano))})
			}
		}
		return out, nil
	}
	ctx, cancel := k.ctx()
	defer cancel()
	kvs, _, err := k.db.List(ctx, CoolingPrefix)
	if err != nil {
		return nil, fmt.Errorf("reading the cooling addresses under %s: %w", CoolingPrefix, err)
	}
	return kvs, nil
}
