package keeper

import (
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/engine/cidr"
	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
)

// block is one pod subnet of the node in one family (the AWS datastore's
// ENI, Cilium's multi-pool CIDR): the subnet cut from the node ID (the
// first block of its family) or one added later (AddPool). Every block
// keeps host 1 as its gateway and the address before its broadcast as its
// NAT loopback, like the first; the addresses between are handed out
// next-fit by its own pool.
type block struct {
	prefix netip.Prefix
	gw     netip.Addr
	pool   *ipalloc.Keyed[allocKey]
	// revoked: an added block the node's grant no longer lists although
	// the node did not give it back (nodeipam freed it: the Node was
	// deleted): nothing new is handed out from it; its allocations keep
	// their addresses until released, and it goes once empty.
	revoked bool
}

// newBlock returns the empty block of prefix.
func newBlock(prefix netip.Prefix) (*block, error) {
	prefix = prefix.Masked()
	if cidr.HostBits(prefix) < addressing.MinPodHostBits {
		return nil, fmt.Errorf("pod subnet %s is too small: it needs at least %d addresses (network, gateway, pods, NAT loopback, broadcast)", prefix, 1<<addressing.MinPodHostBits)
	}
	pool, err := ipalloc.NewKeyed[allocKey](ipalloc.Config{Prefix: prefix, ReserveLow: 2, ReserveHigh: 2})
	if err != nil {
		return nil, fmt.Errorf("pod address pool of %s: %w", prefix, err)
	}
	gw, err := cidr.Addr(prefix, 1)
	if err != nil {
		return nil, fmt.Errorf("gateway of pod subnet %s: %w", prefix, err)
	}
	return &block{prefix: prefix, gw: gw, pool: pool}, nil
}

// role names an address of the block that is never handed out.
func (b *block) role(a netip.Addr) string {
	switch a {
	case b.prefix.Addr():
		return "network address"
	case b.gw:
		return "gateway"
	case cidr.Last(b.prefix).Prev():
		return "NAT loopback"
	}
	return "broadcast address"
}

// blockOf finds the block of the node that holds a.
func (t *table) blockOf(a netip.Addr) (*block, int, bool) {
	i, ok := t.slotOf(a)
	if !ok {
		return nil, 0, false
	}
	for _, b := range t.blocks[i] {
		if b.prefix.Contains(a) {
			return b, i, true
		}
	}
	return nil, i, false
}

// inPool tells whether a lies in a pod subnet of the node.
func (t *table) inPool(a netip.Addr) bool {
	_, _, ok := t.blockOf(a)
	return ok
}

// replyOf is the reply of an allocation of as: each address with its
// block's prefix and gateway.
func (t *table) replyOf(as Addrs, resv string) Reply {
	r := Reply{Addr: as.First(), Addrs: as, Resv: resv}
	for i, a := range as {
		if !a.IsValid() {
			continue
		}
		if b, _, ok := t.blockOf(a); ok {
			r.Nets[i], r.Gws[i] = b.prefix, b.gw
		} else if i < t.slots() {
			f := t.st.Families()[i] // external IPAM: the node's pod subnet
			r.Nets[i], r.Gws[i] = f.PodThis, f.PodGW
		}
	}
	return r
}

// poolOf is the pool that holds a, nil when none.
func (t *table) poolOf(a netip.Addr) *ipalloc.Keyed[allocKey] {
	if b, _, ok := t.blockOf(a); ok {
		return b.pool
	}
	return nil
}

// errOverlap says that pfx overlaps the pod subnet other of the node.
func errOverlap(pfx, other netip.Prefix) error {
	return fmt.Errorf("%s overlaps the pod subnet %s of this node", pfx, other)
}
