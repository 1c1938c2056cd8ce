package keeper

import (
	"cmp"
	"math"
	"net/netip"
	"slices"
	"time"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// This file is what the surfaces read of the table: each call runs on
// the keeper's goroutine as a barrier (after the writes decided before
// it), except Inspect's, which do not wait.

// Claims carries the elastic pools' newest claim to the claimer (see
// Config.WarmTarget): one slot, newest wins.
func (k *Keeper) Claims() <-chan poolblock.Claim { return k.el.claims }

// PodAddr is the pod's address for the pod-ID API: interface eth0's when
// it has several attachments, else the lowest.
func (k *Keeper) PodAddr(pod podmodel.ID) (a netip.Addr, ok bool) {
	k.read(func(t *table) { _, a, ok = t.podAddr(pod) })
	return a, ok
}

// PodOf is the pod holding a.
func (k *Keeper) PodOf(a netip.Addr) (pod podmodel.ID, ok bool) {
	k.read(func(t *table) {
		var key allocKey
		if key, ok = t.owner(a); ok {
			pod = t.podOf(key)
		}
	})
	return pod, ok
}

// AttachmentPrefixes are the addresses of the attachment (one per
// family), each at its pod subnet's prefix length; ready is false before
// the first resync.
func (k *Keeper) AttachmentPrefixes(key podmanager.AttachmentKey) (pfxs []netip.Prefix, found, ready bool) {
	k.read(func(t *table) {
		ready = true
		as, ok := t.lookupAll(attKeyOf(key))
		if !ok {
			return
		}
		found = true
		for _, a := range as {
			if b, _, ok := t.blockOf(a); ok {
				pfxs = append(pfxs, netip.PrefixFrom(a, b.prefix.Bits()))
			}
		}
	})
	return pfxs, found, ready
}

// Servable is how many pods can still get an address (one of each family;
// the cooling addresses count, since an ADD gets one when nothing else is
// free); math.MaxUint64 with an external IPAM; ready is false before the
// first resync.
func (k *Keeper) Servable() (free uint64, ready bool) {
	k.read(func(t *table) {
		ready = true
		free = math.MaxUint64
		if !t.externalMode() {
			free = t.servable(0)
			for i := 1; i < t.slots(); i++ {
				free = min(free, t.servable(i))
			}
		}
	})
	return free, ready
}

// Allocation is one held allocation, for the REST API.
type Allocation struct {
	// Pod is the pod of the allocation (the owner, {OwnerNamespace,
	// name}, of an owner-keyed one).
	Pod podmodel.ID
	// Attachment is the CNI key of an attachment-keyed allocation (zero
	// otherwise); Owner the owner name of an owner-keyed one.
	Attachment podmanager.AttachmentKey
	Owner      string
	Seq        uint64 // the owner's sequence number of an owner-keyed one
	Addrs      Addrs
	// Deadline is the end of its reservation (zero: confirmed, or none).
	Deadline time.Time
	// Born is when the allocation was made (zero when unknown: a record
	// stored by an agent that did not keep the time).
	Born time.Time
}

// Allocations lists every held allocation, sorted by namespace, name
// and attachment.
func (k *Keeper) Allocations() []Allocation {
	var out []Allocation
	var keys []allocKey
	k.read(func(t *table) {
		t.each(func(key allocKey, pod podmodel.ID, as Addrs) bool {
			al := Allocation{Pod: pod, Attachment: key.att, Addrs: as, Born: t.born[key]}
			if key.ownerKeyed() {
				al.Owner, al.Seq = key.pod.Name, key.seq
			}
			if rv, ok := t.resv[key]; ok {
				al.Deadline = rv.deadline
			}
			out = append(out, al)
			keys = append(keys, key)
			return true
		})
	})
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(comparePods(out[a].Pod, out[b].Pod), compareKeys(keys[a], keys[b]))
	})
	sorted := make([]Allocation, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}

// ReservationDeadline is the deadline of reservation id of the allocation
// holding a; false when it has none by that id (confirmed or released
// since).
func (k *Keeper) ReservationDeadline(a netip.Addr, id string) (deadline time.Time, found bool) {
	k.read(func(t *table) {
		if key, held := t.owner(a); held {
			if rv, ok := t.resv[key]; ok && rv.id == id {
				deadline, found = rv.deadline, true
			}
		}
	})
	return deadline, found
}

// KubeStateLive tells whether the keeper's view of the Kubernetes pods
// comes from etcd (a remote DB resync), not from the local mirror.
func (k *Keeper) KubeStateLive() (live bool) {
	k.read(func(*table) { live = k.view.live })
	return live
}

// ApplyGrant makes the node's added pools follow its changed grant (a
// barrier). Before the first resync it fails with ErrNotReady: the first
// resync reads the grant.
func (k *Keeper) ApplyGrant(g poolblock.Grant) error {
	return k.exec(func(t *table, _ *batch) error {
		k.applyGrant(t, g)
		return nil
	})
}

// GC releases every attachment of the input's network that its valid
// list lacks (pod-keyed allocations are untouched) as a barrier, and
// returns once every delete's outcome is known: the number released and
// the errors of the others; ready is false before the first resync.
func (k *Keeper) GC(in *GCInput) (released int, ready bool, err error) {
	rep := k.Do(&Request{Kind: reqRead, read: func(t *table) {
		ready = true
		released, err = k.gc(t, in)
	}})
	if rep.Err != nil {
		return 0, ready, rep.Err
	}
	return released, ready, err
}

// Inspect runs fn with a summary of the pools on the keeper's goroutine,
// without waiting for the writes in flight (for the metrics: a scrape
// must not wait for a stalled disk).
func (k *Keeper) Inspect(fn func(pools []PoolStats, external bool)) {
	k.Do(&Request{Kind: reqInspect, read: func(t *table) { fn(t.stats(), t.externalMode()) }})
}

// Candidate is a held pod that the Kubernetes state lacks: it is released
// at ReleaseAt if a look then still misses it (the second observation).
type Candidate struct {
	Pod podmodel.ID
	// UID is the UID of its missing allocations when they share one
	// ("" when unknown or several).
	UID          string
	Addrs        []netip.Addr // every address of its allocations
	MissingSince time.Time
	ReleaseAt    time.Time
	// SandboxLives: the container runtime's last list has a sandbox of
	// it (see runtime.go).
	SandboxLives bool
}

// Evidence tells why the addresses of pods missing from Kubernetes are not
// released now ("": they are, after their grace period), without waiting
// for the writes in flight.
func (k *Keeper) Evidence() string {
	why := "IPAM has not started"
	k.Do(&Request{Kind: reqInspect, read: func(*table) { why = k.releaseBlock() }})
	return why
}

// sharedUID is the UID of the allocations keys when all of them have
// that one, else "".
func sharedUID(t *table, keys []allocKey) string {
	uid := t.uids[keys[0]]
	for _, key := range keys[1:] {
		if t.uids[key] != uid {
			return ""
		}
	}
	return uid
}

// Candidates lists the release candidates, soonest first, and why they
// are not released when their grace periods end (blocked; "": they are
// released then if still missing), without waiting for the writes in
// flight. Before the first resync there are none.
func (k *Keeper) Candidates() (cands []Candidate, blocked string) {
	blocked = "IPAM has not started"
	k.Do(&Request{Kind: reqInspect, read: func(t *table) {
		blocked = k.releaseBlock()
		for id, a := range k.absent {
			since := a.since
			keys := missingKeys(k.view.pods, t, id)
			if len(keys) == 0 {
				continue // released meanwhile (its DEL), or seen again; the sweep forgets it
			}
			c := Candidate{Pod: id, UID: sharedUID(t, keys), MissingSince: since, ReleaseAt: since.Add(k.cfg.AbsentPodGracePeriod),
				SandboxLives: k.sandboxLives(t, keys)}
			for _, key := range keys {
				if as, ok := t.lookupAll(key); ok {
					c.Addrs = append(c.Addrs, as.List()...)
				}
			}
			cands = append(cands, c)
		}
	}})
	slices.SortFunc(cands, func(a, b Candidate) int {
		return cmp.Or(a.ReleaseAt.Compare(b.ReleaseAt), comparePods(a.Pod, b.Pod))
	})
	return cands, blocked
}
