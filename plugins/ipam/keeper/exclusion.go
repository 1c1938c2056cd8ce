package keeper

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/engine/cidr"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// exclusions are the addresses of the pod subnets that are never handed
// out (Cilium's BlacklistIP and BlacklistIPNet): ipamConfig.excludeIPs,
// the host's local routes (ReserveLocalRoutes) and the exclusions made at
// run time. A free excluded address is held by an exclusion key in its
// pool (so that next-fit skips it and the free count leaves it out); one
// held by an allocation stays with it and is excluded when it is
// released. Exclusions are not stored: the keeper applies them again to
// every table a resync builds.
type exclusions struct {
	owners map[netip.Addr]string // excluded address -> owner, for the log
	seq    uint64
}

func newExclusions() exclusions { return exclusions{owners: map[netip.Addr]string{}} }

// Exclusion is one excluded prefix and its owner.
type Exclusion struct {
	Prefix netip.Prefix
	Owner  string
}

// maxExcludedBits bounds one exclusion inside a pod subnet: at most 2^16
// addresses, each held by a key of its own.
const maxExcludedBits = 16

// ErrExclusionTooBig: an exclusion covers more than 2^maxExcludedBits
// addresses of a pod subnet, or all of it.
var ErrExclusionTooBig = errors.New("the exclusion is too big")

// exclude excludes the addresses of e inside the node's pod subnets and
// returns how many it excluded now (free ones); an address held by an
// allocation is excluded once it is released. A prefix outside every pod
// subnet excludes nothing.
func (t *table) exclude(e Exclusion) (int, error) {
	pfx := e.Prefix.Masked()
	slot, ok := t.slotOf(pfx.Addr())
	if !ok || t.externalMode() {
		return 0, nil
	}
	n := 0
	for _, b := range t.blocks[slot] {
		m, err := t.excludeIn(b, pfx, e.Owner)
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// excludeIn excludes the addresses of pfx inside block b.
func (t *table) excludeIn(b *block, pfx netip.Prefix, owner string) (int, error) {
	switch {
	case !b.prefix.Overlaps(pfx):
		return 0, nil
	case pfx.Bits() <= b.prefix.Bits():
		return 0, fmt.Errorf("exclusion %s (owner %q) covers the whole pod subnet %s: %w", pfx, owner, b.prefix, ErrExclusionTooBig)
	case cidr.HostBits(pfx) > maxExcludedBits:
		return 0, fmt.Errorf("exclusion %s (owner %q) covers more than 2^%d addresses of the pod subnet %s: %w", pfx, owner, maxExcludedBits, b.prefix, ErrExclusionTooBig)
	}
	n := 0
	for a := pfx.Addr(); a.IsValid() && pfx.Contains(a); a = a.Next() {
		if _, done := t.excl.owners[a]; done {
			continue
		}
		if !b.pool.Pool().Contains(a) {
			continue // the network address, the gateway, the NAT loopback, the broadcast
		}
		t.excl.owners[a] = owner
		if _, held := b.pool.Owner(a); held {
			continue
		}
		if t.takeExcluded(a) {
			n++
		}
	}
	return n, nil
}

// takeExcluded holds a free excluded address by an exclusion key.
func (t *table) takeExcluded(a netip.Addr) bool {
	p := t.poolOf(a)
	if p == nil {
		return false
	}
	t.excl.seq++
	key := allocKey{pod: podmodel.ID{Namespace: excludedNamespace, Name: t.excl.owners[a]}, seq: t.excl.seq}
	return p.AssignAddr(key, a) == nil
}

// excludeFreed takes the excluded ones of addresses just freed.
func (t *table) excludeFreed(as Addrs) {
	if len(t.excl.owners) == 0 {
		return
	}
	for _, a := range as {
		if _, ok := t.excl.owners[a]; ok && a.IsValid() {
			t.takeExcluded(a)
		}
	}
}

// excludedBy names the owner of the exclusion of a, false when a is not
// excluded.
func (t *table) excludedBy(a netip.Addr) (string, bool) {
	owner, ok := t.excl.owners[a]
	return owner, ok
}

// excludedCount is the number of excluded addresses of slot i that no
// allocation holds.
func (t *table) excludedCount(i int) int {
	n := 0
	for a := range t.excl.owners {
		if slot, ok := t.slotOf(a); ok && slot == i {
			if p := t.poolOf(a); p != nil {
				if k, held := p.Owner(a); held && k.excluded() {
					n++
				}
			}
		}
	}
	return n
}
