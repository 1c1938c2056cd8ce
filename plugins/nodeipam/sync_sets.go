package nodeipam

import (
	"net/netip"
	"slices"
	"sync"
)

// syncSets are the blocks (a blockBook) that the node sync loops share,
// with the CIDRs each node holds. Safe for concurrent use. Without
// cluster ranges there are no sets: every CIDR is outside, and allocate
// fails.
type syncSets struct {
	mu   sync.Mutex // guards what follows
	book *blockBook
	held map[string][]netip.Prefix // node -> its CIDRs, as given
}

// newSyncSets builds a set per cluster range of cfg, without the blocks
// that overlap the service ranges.
func newSyncSets(cfg Config, metrics *Metrics) (*syncSets, error) {
	book, err := newBlockBook(cfg, metrics)
	if err != nil {
		return nil, err
	}
	return &syncSets{book: book, held: make(map[string][]netip.Prefix)}, nil
}

// configured tells whether there are cluster ranges.
func (s *syncSets) configured() bool { return len(s.book.sets) > 0 }

// clusters returns the cluster ranges.
func (s *syncSets) clusters() []netip.Prefix { return s.book.clusters() }

// allocate hands node the next free block of every range (after freeing
// what it held), or nothing: the error wraps ErrNoCIDRsRemaining.
func (s *syncSets) allocate(node string) ([]netip.Prefix, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(node)
	cidrs, err := s.book.allocate(node)
	if err != nil {
		return nil, err
	}
	s.held[node] = cidrs
	return cidrs, nil
}

// adopt takes cidrs for node when each is one free block (or node's
// already); see blockBook.adopt.
func (s *syncSets) adopt(node string, cidrs []netip.Prefix) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, ok := s.held[node]; ok && slices.Equal(held, cidrs) {
		return true
	}
	if !s.book.adopt(node, cidrs) {
		return false
	}
	s.held[node] = slices.Clone(cidrs)
	return true
}

// occupy marks node's CIDRs as taken (after freeing what it held before,
// unless that is the same). It returns the CIDRs outside every range and
// those with a block another node holds (that block stays theirs).
func (s *syncSets) occupy(node string, cidrs []netip.Prefix) (outside []netip.Prefix, conflicts []conflict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, ok := s.held[node]; ok && slices.Equal(held, cidrs) {
		return nil, nil
	}
	s.releaseLocked(node)
	outside, conflicts = s.book.occupy(node, cidrs)
	s.held[node] = slices.Clone(cidrs)
	return outside, conflicts
}

// outside returns the CIDRs of cidrs outside every cluster range (or
// far larger than a block); none when there are no cluster ranges.
func (s *syncSets) outside(cidrs []netip.Prefix) []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.book.sets) == 0 {
		return nil
	}
	return s.book.outside(cidrs)
}

// release frees the blocks node holds.
func (s *syncSets) release(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(node)
}

func (s *syncSets) releaseLocked(node string) {
	if cidrs, ok := s.held[node]; ok {
		delete(s.held, node)
		s.book.free(node, cidrs)
	}
}

// used returns the blocks taken in each range.
func (s *syncSets) used() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, len(s.book.sets))
	for i, set := range s.book.sets {
		out[i] = set.Used()
	}
	return out
}
