package nodeipam

import (
	"fmt"
	"net/netip"
	"slices"
)

// blockBook is the blocks of every cluster range (one CIDRSet each) with
// the node that holds each taken block, shared by the range allocator and
// the sync loops. It is not safe for concurrent use: its owner locks.
//
// A block two nodes hold (a conflict, reported by the caller) is owned by
// the first; the others are recorded, and when the owner goes the block
// passes to the next one, so it is never free while a node holds it.
type blockBook struct {
	metrics *Metrics
	sets    []*CIDRSet
	owner   map[netip.Prefix]string   // taken block -> node
	shared  map[netip.Prefix][]string // block -> the other nodes that hold it too
}

// conflict is a CIDR of a node with a block another node holds.
type conflict struct {
	cidr  netip.Prefix
	other string
}

// newBlockBook builds a set per cluster range of cfg, without the blocks
// that overlap the service ranges.
func newBlockBook(cfg Config, metrics *Metrics) (*blockBook, error) {
	ranges, err := cfg.Ranges()
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	b := &blockBook{metrics: metrics, owner: make(map[netip.Prefix]string), shared: make(map[netip.Prefix][]string)}
	for i, c := range ranges.Clusters {
		set, err := NewCIDRSet(c, ranges.MaskSizes[i], ranges.Services...)
		if err != nil {
			return nil, fmt.Errorf("nodeipam: %w", err)
		}
		b.sets = append(b.sets, set)
		metrics.gauge(set)
	}
	return b, nil
}

// clusters returns the cluster ranges.
func (b *blockBook) clusters() []netip.Prefix {
	out := make([]netip.Prefix, len(b.sets))
	for i, set := range b.sets {
		out[i] = set.ClusterCIDR()
	}
	return out
}

// setFor returns the set whose range overlaps p: the one that holds p,
// or the one p covers (as Kubernetes' cidrset, whose Occupy of a CIDR
// that covers the range takes every block). The ranges are of different
// families, so at most one overlaps.
func (b *blockBook) setFor(p netip.Prefix) *CIDRSet {
	for _, set := range b.sets {
		if p.IsValid() && set.ClusterCIDR().Overlaps(p) {
			return set
		}
	}
	return nil
}

// allocate hands node the next free block of every range, or nothing: a
// full range gives back the blocks taken from the others, and the error
// wraps ErrNoCIDRsRemaining.
func (b *blockBook) allocate(node string) ([]netip.Prefix, error) {
	if len(b.sets) == 0 {
		return nil, fmt.Errorf("node %s: no cluster ranges to allocate from: %w", node, ErrNoCIDRsRemaining)
	}
	var cidrs []netip.Prefix
	for _, set := range b.sets {
		p, err := set.AllocateNext()
		if err != nil {
			b.free(node, cidrs)
			return nil, err
		}
		b.owner[p] = node
		cidrs = append(cidrs, p)
		b.metrics.allocations.WithLabelValues(set.ClusterCIDR().String()).Inc()
		b.metrics.gauge(set)
	}
	return cidrs, nil
}

// complete returns a block of every range for node: the block of have
// that node owns in that range, else the next free one (a full range
// gives back the blocks taken from the others; the error wraps
// ErrNoCIDRsRemaining). kept are the blocks of have it returned.
func (b *blockBook) complete(node string, have []netip.Prefix) (cidrs, kept []netip.Prefix, err error) {
	var taken []netip.Prefix
	for _, set := range b.sets {
		if p, ok := b.ownedIn(set, node, have); ok {
			kept = append(kept, p)
			cidrs = append(cidrs, p)
			continue
		}
		p, err := set.AllocateNext()
		if err != nil {
			b.free(node, taken)
			return nil, nil, err
		}
		b.owner[p] = node
		taken = append(taken, p)
		cidrs = append(cidrs, p)
		b.metrics.allocations.WithLabelValues(set.ClusterCIDR().String()).Inc()
		b.metrics.gauge(set)
	}
	return cidrs, kept, nil
}

// ownedIn returns the block of have that is exactly one block of set and
// owned by node.
func (b *blockBook) ownedIn(set *CIDRSet, node string, have []netip.Prefix) (netip.Prefix, bool) {
	for _, p := range have {
		if !set.ClusterCIDR().Contains(p.Masked().Addr()) {
			continue
		}
		if i, exact, err := set.Index(p); err == nil && exact && set.IsTaken(i) && b.owner[p] == node {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// adopt takes cidrs for node if each is exactly one block of a range and
// every block is free or node's already; it takes nothing otherwise.
func (b *blockBook) adopt(node string, cidrs []netip.Prefix) bool {
	for _, p := range cidrs {
		set := b.setFor(p)
		if set == nil {
			return false
		}
		i, exact, err := set.Index(p)
		if err != nil || !exact || (set.IsTaken(i) && b.owner[p] != node) {
			return false
		}
	}
	_, conflicts := b.occupy(node, cidrs)
	return len(conflicts) == 0
}

// outside returns the CIDRs of cidrs that occupy would report as
// outside: in no range, or far larger than a block.
func (b *blockBook) outside(cidrs []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range cidrs {
		set := b.setFor(p)
		if set == nil {
			out = append(out, p)
			continue
		}
		if _, _, err := set.blocks(p, maxOccupyBlocks); err != nil {
			out = append(out, p)
		}
	}
	return out
}

// occupy takes the blocks of cidrs for node. It returns the CIDRs outside
// every range and those with a block another node holds (recorded as
// shared: the other node keeps it).
func (b *blockBook) occupy(node string, cidrs []netip.Prefix) (outside []netip.Prefix, conflicts []conflict) {
	for _, p := range cidrs {
		set := b.setFor(p)
		if set == nil {
			outside = append(outside, p)
			continue
		}
		if _, _, err := set.blocks(p, maxOccupyBlocks); err != nil {
			outside = append(outside, p) // far larger than a block: not walked
			continue
		}
		if other := b.occupyBlocks(set, p, node); other != "" {
			conflicts = append(conflicts, conflict{cidr: p, other: other})
		}
	}
	return outside, conflicts
}

// occupyBlocks takes the blocks of p for node, skipping the excluded ones
// and those another node holds (it returns that node's name).
func (b *blockBook) occupyBlocks(set *CIDRSet, p netip.Prefix, node string) (other string) {
	label := set.ClusterCIDR().String()
	b.each(set, p, func(blk netip.Prefix) {
		if o, ok := b.owner[blk]; ok && o != node {
			other = o
			if !slices.Contains(b.shared[blk], node) {
				b.shared[blk] = append(b.shared[blk], node)
			}
		} else if n, _ := set.Occupy(blk); n > 0 {
			b.owner[blk] = node
			b.metrics.allocations.WithLabelValues(label).Inc()
		}
	})
	b.metrics.gauge(set)
	return other
}

// free gives up node's hold on the blocks of cidrs: a block it owns is
// freed, or passes to another node that holds it too.
func (b *blockBook) free(node string, cidrs []netip.Prefix) {
	for _, p := range cidrs {
		set := b.setFor(p)
		if set == nil {
			continue
		}
		label := set.ClusterCIDR().String()
		b.each(set, p, func(blk netip.Prefix) {
			switch {
			case b.owner[blk] == node && len(b.shared[blk]) > 0:
				b.owner[blk] = b.shared[blk][0]
				b.unshare(blk, b.owner[blk])
			case b.owner[blk] == node:
				delete(b.owner, blk)
				if n, _ := set.Release(blk); n > 0 {
					b.metrics.releases.WithLabelValues(label).Inc()
				}
			default:
				b.unshare(blk, node)
			}
		})
		b.metrics.gauge(set)
	}
}

// unshare removes node from the other holders of block blk.
func (b *blockBook) unshare(blk netip.Prefix, node string) {
	rest := slices.DeleteFunc(b.shared[blk], func(n string) bool { return n == node })
	if len(rest) == 0 {
		delete(b.shared, blk)
		return
	}
	b.shared[blk] = rest
}

// each calls fn with every block p covers (none if p covers too many).
func (b *blockBook) each(set *CIDRSet, p netip.Prefix, fn func(blk netip.Prefix)) {
	first, last, err := set.blocks(p, maxOccupyBlocks)
	if err != nil {
		return
	}
	for i := first; ; i++ {
		fn(set.Block(i))
		if i == last {
			return
		}
	}
}

// usage returns the state of every range.
func (b *blockBook) usage() []Usage {
	out := make([]Usage, 0, len(b.sets))
	for _, s := range b.sets {
		out = append(out, Usage{ClusterCIDR: s.ClusterCIDR().String(), MaskSize: s.MaskSize(),
			Size: s.Size(), Used: s.Used(), Free: s.Free()})
	}
	return out
}
