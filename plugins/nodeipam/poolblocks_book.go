package nodeipam

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
)

// poolBook is the blocks of the pool ranges, one CIDRSet per family, with
// the node that holds each taken block. It is not safe for concurrent use:
// its owner locks.
//
// A block that two grants hold (corrupt state, reported by the caller) is
// owned by the first node that took it; the others are recorded, and when
// the owner drops it the block passes to the next one, so it is free only
// once every node that holds it has dropped it.
type poolBook struct {
	sets   map[string]*CIDRSet       // by poolblock.Family
	owner  map[netip.Prefix]string   // taken block -> node
	shared map[netip.Prefix][]string // block -> the other nodes that hold it too
}

// newPoolBook builds a set per range of cfg.
func newPoolBook(cfg PoolBlockConfig) (*poolBook, error) {
	ranges, err := cfg.Ranges()
	if err != nil {
		return nil, err
	}
	b := &poolBook{sets: make(map[string]*CIDRSet), owner: make(map[netip.Prefix]string),
		shared: make(map[netip.Prefix][]string)}
	for _, r := range ranges {
		set, err := NewCIDRSet(r, cfg.blockSize(r))
		if err != nil {
			return nil, err
		}
		b.sets[poolblock.Family(r)] = set
	}
	return b, nil
}

// setFor returns the set whose range holds p's first address.
func (b *poolBook) setFor(p netip.Prefix) *CIDRSet {
	if !p.IsValid() {
		return nil
	}
	set := b.sets[poolblock.Family(p)]
	if set == nil || !set.ClusterCIDR().Contains(p.Masked().Addr()) {
		return nil
	}
	return set
}

// take hands node the next free block of family (next-fit), never one of
// skip: those it meets are given back once it has found another. The
// error wraps ErrNoCIDRsRemaining when no block is free.
func (b *poolBook) take(node, family string, skip map[netip.Prefix]bool) (netip.Prefix, error) {
	set := b.sets[family]
	if set == nil {
		return netip.Prefix{}, fmt.Errorf("no %s range to cut blocks from: %w", family, ErrNoCIDRsRemaining)
	}
	var skipped []netip.Prefix
	defer func() {
		for _, p := range skipped {
			_, _ = set.Release(p)
		}
	}()
	for {
		p, err := set.AllocateNext()
		if err != nil {
			return netip.Prefix{}, err
		}
		if skip[p] {
			skipped = append(skipped, p)
			continue
		}
		b.owner[p] = node
		return p, nil
	}
}

// hold marks the blocks p covers as node's. outside: p is in no range (or
// covers too many blocks to walk); other: a node that holds one of them
// already and keeps it.
func (b *poolBook) hold(node string, p netip.Prefix) (outside bool, other string) {
	set := b.setFor(p)
	if set == nil {
		return true, ""
	}
	if !b.each(set, p, func(blk netip.Prefix) {
		switch o, ok := b.owner[blk]; {
		case ok && o != node:
			other = o
			if !slices.Contains(b.shared[blk], node) {
				b.shared[blk] = append(b.shared[blk], node)
			}
		case !ok:
			if n, _ := set.Occupy(blk); n > 0 {
				b.owner[blk] = node
			}
		}
	}) {
		return true, ""
	}
	return false, other
}

// drop gives up node's hold on the blocks p covers: a block it owns is
// freed, or passes to another node that holds it too. It returns how many
// blocks became free.
func (b *poolBook) drop(node string, p netip.Prefix) (freed int) {
	set := b.setFor(p)
	if set == nil {
		return 0
	}
	b.each(set, p, func(blk netip.Prefix) {
		switch {
		case b.owner[blk] == node && len(b.shared[blk]) > 0:
			b.owner[blk] = b.shared[blk][0]
			b.unshare(blk, b.owner[blk])
		case b.owner[blk] == node:
			delete(b.owner, blk)
			n, _ := set.Release(blk)
			freed += n
		default:
			b.unshare(blk, node)
		}
	})
	return freed
}

// unshare removes node from the other holders of block blk.
func (b *poolBook) unshare(blk netip.Prefix, node string) {
	rest := slices.DeleteFunc(b.shared[blk], func(n string) bool { return n == node })
	if len(rest) == 0 {
		delete(b.shared, blk)
		return
	}
	b.shared[blk] = rest
}

// each calls fn with every block p covers; false when p covers too many
// blocks to walk (fn is not called).
func (b *poolBook) each(set *CIDRSet, p netip.Prefix, fn func(blk netip.Prefix)) bool {
	first, last, err := set.blocks(p, maxOccupyBlocks)
	if err != nil {
		return false
	}
	for i := first; ; i++ {
		fn(set.Block(i))
		if i == last {
			return true
		}
	}
}

// families returns the families with a range, sorted ("ipv4" first).
func (b *poolBook) families() []string {
	out := make([]string, 0, len(b.sets))
	for f := range b.sets {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}
