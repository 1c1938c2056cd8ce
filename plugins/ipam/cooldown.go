package ipam

import (
	"net/netip"
	"time"

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
// leaves it out, and is freed by the sweep once its time is up. They are
// kept in memory only: a restart frees them.
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
func (t *table) coolDown(as addrs, until time.Time) {
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

// warmUp frees the addresses whose cooldown is over (the sweep).
func (k *keeper) warmUp() { k.tab.warmUp(k.clock.Now()) }
