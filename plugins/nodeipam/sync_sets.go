package nodeipam

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// syncSets are the CIDRSets (one per cluster range) that the node sync
// loops share, with the owner of every taken block so that a node's
// release never frees another node's blocks. Safe for concurrent use.
// Without cluster ranges there are no sets: every CIDR is outside, and
// allocate fails.
type syncSets struct {
	metrics *Metrics

	mu    sync.Mutex // guards what follows
	sets  []*CIDRSet
	owner map[netip.Prefix]string   // taken block -> node
	held  map[string][]netip.Prefix // node -> its CIDRs, as given
}

// newSyncSets builds a set per cluster range of cfg, without the blocks
// that overlap the service ranges.
func newSyncSets(cfg Config, metrics *Metrics) (*syncSets, error) {
	ranges, err := cfg.Ranges()
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	s := &syncSets{metrics: metrics, owner: make(map[netip.Prefix]string), held: make(map[string][]netip.Prefix)}
	for i, c := range ranges.Clusters {
		set, err := NewCIDRSet(c, ranges.MaskSizes[i], ranges.Services...)
		if err != nil {
			return nil, fmt.Errorf("nodeipam: %w", err)
		}
		s.sets = append(s.sets, set)
		metrics.gauge(set)
	}
	return s, nil
}

// configured tells whether there are cluster ranges.
func (s *syncSets) configured() bool { return len(s.sets) > 0 }

// clusters returns the cluster ranges.
func (s *syncSets) clusters() []netip.Prefix {
	out := make([]netip.Prefix, len(s.sets))
	for i, set := range s.sets {
		out[i] = set.ClusterCIDR()
	}
	return out
}

// allocate hands node the next free block of every range, or nothing:
// a full range gives back the blocks taken from the others, and the error
// wraps ErrNoCIDRsRemaining.
func (s *syncSets) allocate(node string) ([]netip.Prefix, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sets) == 0 {
		return nil, fmt.Errorf("node %s: no cluster ranges to allocate from: %w", node, ErrNoCIDRsRemaining)
	}
	s.releaseLocked(node)
	var cidrs []netip.Prefix
	for _, set := range s.sets {
		p, err := set.AllocateNext()
		if err != nil {
			s.held[node] = cidrs
			s.releaseLocked(node)
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		s.owner[p] = node
		cidrs = append(cidrs, p)
		s.metrics.allocations.WithLabelValues(set.ClusterCIDR().String()).Inc()
		s.metrics.gauge(set)
	}
	s.held[node] = cidrs
	return cidrs, nil
}

// occupy marks node's CIDRs as taken (after freeing what it held before,
// unless that is the same). It returns the CIDRs outside every range and
// the other node holding a block of a CIDR, if any (that block stays
// theirs).
func (s *syncSets) occupy(node string, cidrs []netip.Prefix) (outside []netip.Prefix, conflicts []conflict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, ok := s.held[node]; ok && slices.Equal(held, cidrs) {
		return nil, nil
	}
	s.releaseLocked(node)
	for _, p := range cidrs {
		set := s.setFor(p)
		if set == nil {
			outside = append(outside, p)
			continue
		}
		if other := s.occupyBlocks(set, p, node); other != "" {
			conflicts = append(conflicts, conflict{cidr: p, other: other})
		}
	}
	s.held[node] = slices.Clone(cidrs)
	return outside, conflicts
}

// occupyBlocks takes the free blocks of p for node and returns the other
// node that holds one of them, if any.
func (s *syncSets) occupyBlocks(set *CIDRSet, p netip.Prefix, node string) (other string) {
	first, last, err := set.blocks(p, maxOccupyBlocks)
	if err != nil {
		return ""
	}
	label := set.ClusterCIDR().String()
	for i := first; ; i++ {
		b := set.Block(i)
		if o, ok := s.owner[b]; ok && o != node {
			other = o
		} else if n, _ := set.Occupy(b); n > 0 {
			s.owner[b] = node
			s.metrics.allocations.WithLabelValues(label).Inc()
		}
		if i == last {
			break
		}
	}
	s.metrics.gauge(set)
	return other
}

// release frees the blocks node holds.
func (s *syncSets) release(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(node)
}

func (s *syncSets) releaseLocked(node string) {
	cidrs, ok := s.held[node]
	if !ok {
		return
	}
	delete(s.held, node)
	for _, p := range cidrs {
		set := s.setFor(p)
		if set == nil {
			continue
		}
		first, last, err := set.blocks(p, maxOccupyBlocks)
		if err != nil {
			continue
		}
		for i := first; ; i++ {
			if b := set.Block(i); s.owner[b] == node {
				delete(s.owner, b)
				if n, _ := set.Release(b); n > 0 {
					s.metrics.releases.WithLabelValues(set.ClusterCIDR().String()).Inc()
				}
			}
			if i == last {
				break
			}
		}
		s.metrics.gauge(set)
	}
}

// setFor returns the set whose range holds p's first address.
func (s *syncSets) setFor(p netip.Prefix) *CIDRSet {
	for _, set := range s.sets {
		if set.ClusterCIDR().Contains(p.Masked().Addr()) {
			return set
		}
	}
	return nil
}

// used returns the blocks taken in each range.
func (s *syncSets) used() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, len(s.sets))
	for i, set := range s.sets {
		out[i] = set.Used()
	}
	return out
}
