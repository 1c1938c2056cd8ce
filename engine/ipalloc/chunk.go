package ipalloc

import "math/bits"

const (
	allOnes    = ^uint64(0)
	chunkShift = 12                    // a chunk holds 2^12 addresses
	chunkBits  = 1 << chunkShift       // addresses per chunk
	chunkMask  = chunkBits - 1         // index of an address inside its chunk
	chunkWords = chunkBits / 64        // bitmap words per chunk
	maxChunk   = allOnes >> chunkShift // the chunk of index 2^64-1
	maxGroup   = maxChunk >> 6         // the group (64 chunks) of that chunk
)

// chunk is a fixed-size block of the bitmap: one bit per address, set when
// the address is taken (allocated or reserved). nonFull is the summary
// level: bit w is set when words[w] has a clear bit, so a search skips full
// words without reading them.
type chunk struct {
	words   [chunkWords]uint64
	nonFull uint64
	n       uint32 // number of set bits
}

// init empties the chunk.
func (c *chunk) init() { *c = chunk{nonFull: allOnes} }

// full reports whether every bit is set.
func (c *chunk) full() bool { return c.nonFull == 0 }

// test reports whether bit b (0 <= b < chunkBits) is set.
func (c *chunk) test(b uint64) bool {
	return c.words[(b>>6)%chunkWords]&(1<<(b&63)) != 0
}

// set sets bit b and reports whether it was clear.
func (c *chunk) set(b uint64) bool {
	w, m := (b>>6)%chunkWords, uint64(1)<<(b&63)
	if c.words[w]&m != 0 {
		return false
	}
	c.words[w] |= m
	if c.words[w] == allOnes {
		c.nonFull &^= 1 << w
	}
	c.n++
	return true
}

// clear clears bit b and reports whether it was set.
func (c *chunk) clear(b uint64) bool {
	w, m := (b>>6)%chunkWords, uint64(1)<<(b&63)
	if c.words[w]&m == 0 {
		return false
	}
	c.words[w] &^= m
	c.nonFull |= 1 << w
	c.n--
	return true
}

// nextFree returns the first clear bit at or after b, false if there is
// none in this chunk.
func (c *chunk) nextFree(b uint64) (uint64, bool) {
	w := (b >> 6) % chunkWords
	if x := ^c.words[w] & (allOnes << (b & 63)); x != 0 {
		return w<<6 | uint64(bits.TrailingZeros64(x)), true
	}
	later := c.nonFull & (allOnes << w << 1)
	if later == 0 {
		return 0, false
	}
	w = uint64(bits.TrailingZeros64(later)) % chunkWords
	return w<<6 | uint64(bits.TrailingZeros64(^c.words[w])), true
}

// each calls fn with every set bit in ascending order, added to base, until
// fn returns false; it reports whether fn never did.
func (c *chunk) each(base uint64, fn func(i uint64) bool) bool {
	for w, word := range c.words {
		for word != 0 {
			b := uint64(bits.TrailingZeros64(word))
			if !fn(base + uint64(w)<<6 + b) {
				return false
			}
			word &= word - 1
		}
	}
	return true
}

// bitset is the bitmap of a pool's window, indexed from 0 (the first
// address of the window). A set bit is a taken address. Indices beyond the
// window are never set, so a search may return one of them: the caller
// bounds the result by the window.
type bitset interface {
	set(i uint64) bool
	clear(i uint64) bool
	test(i uint64) bool
	// nextFree returns the first clear index at or after i.
	nextFree(i uint64) (uint64, bool)
	// each calls fn with every set index in ascending order until fn
	// returns false.
	each(fn func(i uint64) bool)
	// reset clears every bit.
	reset()
}
