package ipalloc

import (
	"maps"
	"math/bits"
	"slices"
)

// maxSpare is how many empty chunks a sparse bitmap keeps for reuse, so
// that allocations and releases at a chunk boundary do not allocate memory.
const maxSpare = 4

// sparse is the bitmap of a big window: only chunks with a set bit exist
// (an absent chunk is all clear), and a chunk is dropped when its last bit
// is cleared, so memory follows the number of taken addresses, not the
// window size. full has one word per group of 64 chunks with a bit set per
// full chunk; a group without full chunks has no entry.
type sparse struct {
	chunks map[uint64]*chunk
	full   map[uint64]uint64
	spare  []*chunk
	// lastC and last cache the chunk that set or searched last: next-fit
	// works near the cursor, while releases land anywhere and so do not
	// replace it. last is nil when nothing is cached.
	lastC uint64
	last  *chunk
}

var _ bitset = (*sparse)(nil)

// newSparse returns an empty sparse bitmap.
func newSparse() *sparse {
	s := &sparse{}
	s.reset()
	return s
}

// chunk returns chunk c, nil if it is absent.
func (s *sparse) chunk(c uint64) *chunk {
	if s.last != nil && s.lastC == c {
		return s.last
	}
	ch := s.chunks[c]
	if ch != nil {
		s.lastC, s.last = c, ch
	}
	return ch
}

// peek returns chunk c, nil if it is absent, without caching it.
func (s *sparse) peek(c uint64) *chunk {
	if s.last != nil && s.lastC == c {
		return s.last
	}
	return s.chunks[c]
}

func (s *sparse) set(i uint64) bool {
	c := i >> chunkShift
	ch := s.chunk(c)
	if ch == nil {
		ch = s.newChunk()
		s.chunks[c] = ch
		s.lastC, s.last = c, ch
	}
	if !ch.set(i & chunkMask) {
		return false
	}
	if ch.full() {
		s.full[c>>6] |= 1 << (c & 63)
	}
	return true
}

func (s *sparse) clear(i uint64) bool {
	c := i >> chunkShift
	ch := s.peek(c)
	if ch == nil {
		return false
	}
	wasFull := ch.full()
	if !ch.clear(i & chunkMask) {
		return false
	}
	if wasFull {
		s.markNotFull(c)
	}
	if ch.n == 0 {
		delete(s.chunks, c)
		if s.last == ch {
			s.last = nil
		}
		if len(s.spare) < maxSpare {
			s.spare = append(s.spare, ch)
		}
	}
	return true
}

func (s *sparse) markNotFull(c uint64) {
	g := c >> 6
	if m := s.full[g] &^ (1 << (c & 63)); m != 0 {
		s.full[g] = m
	} else {
		delete(s.full, g)
	}
}

func (s *sparse) newChunk() *chunk {
	var ch *chunk
	if n := len(s.spare); n > 0 {
		ch, s.spare = s.spare[n-1], s.spare[:n-1]
	} else {
		ch = new(chunk)
	}
	ch.init()
	return ch
}

func (s *sparse) test(i uint64) bool {
	ch := s.peek(i >> chunkShift)
	return ch != nil && ch.test(i&chunkMask)
}

func (s *sparse) nextFree(i uint64) (uint64, bool) {
	c := i >> chunkShift
	ch := s.chunk(c)
	if ch == nil {
		return i, true
	}
	if b, ok := ch.nextFree(i & chunkMask); ok {
		return c<<chunkShift | b, true
	}
	if c == maxChunk {
		return 0, false
	}
	c, ok := s.nextNotFull(c + 1)
	if !ok {
		return 0, false
	}
	if ch = s.chunk(c); ch == nil {
		return c << chunkShift, true
	}
	b, ok := ch.nextFree(0)
	return c<<chunkShift | b, ok
}

// nextNotFull returns the first chunk at or after c that is not full. It
// reads one map entry per group of 64 full chunks it skips.
func (s *sparse) nextNotFull(c uint64) (uint64, bool) {
	g := c >> 6
	x := ^s.full[g] & (allOnes << (c & 63))
	for x == 0 {
		if g == maxGroup {
			return 0, false
		}
		g++
		x = ^s.full[g]
	}
	return g<<6 | uint64(bits.TrailingZeros64(x)), true
}

func (s *sparse) each(fn func(i uint64) bool) {
	for _, c := range slices.Sorted(maps.Keys(s.chunks)) {
		ch := s.chunks[c]
		if ch != nil && !ch.each(c<<chunkShift, fn) {
			return
		}
	}
}

func (s *sparse) reset() {
	s.chunks = make(map[uint64]*chunk)
	s.full = make(map[uint64]uint64)
	s.last = nil
}
