package engine

import "math/bits"

// bitmap is the yardstick: the least a next-fit allocator has to do. One
// bit per address of a window of n addresses in a flat []uint64, a cursor,
// and a search a word at a time. It has no summaries, so a search in a
// nearly full window reads every word in between.
type bitmap struct {
	words  []uint64
	n      uint64 // addresses in the window
	used   uint64
	cursor uint64 // where the next search starts: after the last bit handed out
}

func newBitmap(n uint64) *bitmap {
	m := &bitmap{words: make([]uint64, (n+63)/64), n: n}
	if r := n % 64; r != 0 {
		m.words[len(m.words)-1] = ^uint64(0) << r // the bits past n are never free
	}
	return m
}

// take sets bit i; false if it was set already.
func (m *bitmap) take(i uint64) bool {
	w, bit := i/64, uint64(1)<<(i%64)
	if m.words[w]&bit != 0 {
		return false
	}
	m.words[w] |= bit
	m.used++
	return true
}

// free clears bit i; false if it was clear.
func (m *bitmap) free(i uint64) bool {
	w, bit := i/64, uint64(1)<<(i%64)
	if m.words[w]&bit == 0 {
		return false
	}
	m.words[w] &^= bit
	m.used--
	return true
}

// next sets and returns the first clear bit at or after the cursor,
// wrapping around at n; false when every bit is set.
func (m *bitmap) next() (uint64, bool) {
	if m.used == m.n {
		return 0, false
	}
	w := m.cursor / 64
	x := ^m.words[w] &^ (uint64(1)<<(m.cursor%64) - 1)
	for x == 0 { // ends: some bit is clear, at worst below the cursor in word w
		if w++; w == uint64(len(m.words)) {
			w = 0
		}
		x = ^m.words[w]
	}
	i := w*64 + uint64(bits.TrailingZeros64(x))
	m.words[w] |= 1 << (i % 64)
	m.used++
	if m.cursor = i + 1; m.cursor == m.n {
		m.cursor = 0
	}
	return i, true
}
