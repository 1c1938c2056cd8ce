package ipalloc

import "math/bits"

// denseMaxSpan is the largest window span (last index) stored densely: a
// window of up to 2^20 addresses is one slice of chunks (128 KiB of bits at
// most), a bigger one is sparse.
const denseMaxSpan = 1<<20 - 1

// dense is the bitmap of a small window: every chunk exists. full has one
// bit per chunk, set when the chunk is full, so a search skips 64 full
// chunks (2^18 addresses) per word.
type dense struct {
	chunks []chunk
	full   []uint64
}

var _ bitset = (*dense)(nil)

// newDense returns an empty bitmap for indices 0..span.
func newDense(span uint64) *dense {
	n := span>>chunkShift + 1
	d := &dense{chunks: make([]chunk, n), full: make([]uint64, (n+63)/64)}
	d.reset()
	return d
}

func (d *dense) chunk(c uint64) *chunk {
	if c >= uint64(len(d.chunks)) {
		return nil
	}
	return &d.chunks[c]
}

func (d *dense) set(i uint64) bool {
	c := i >> chunkShift
	ch := d.chunk(c)
	if ch == nil || !ch.set(i&chunkMask) {
		return false
	}
	if ch.full() {
		d.full[c>>6] |= 1 << (c & 63)
	}
	return true
}

func (d *dense) clear(i uint64) bool {
	c := i >> chunkShift
	ch := d.chunk(c)
	if ch == nil || !ch.clear(i&chunkMask) {
		return false
	}
	d.full[c>>6] &^= 1 << (c & 63)
	return true
}

func (d *dense) test(i uint64) bool {
	ch := d.chunk(i >> chunkShift)
	return ch != nil && ch.test(i&chunkMask)
}

func (d *dense) nextFree(i uint64) (uint64, bool) {
	c := i >> chunkShift
	ch := d.chunk(c)
	if ch == nil {
		return 0, false
	}
	if b, ok := ch.nextFree(i & chunkMask); ok {
		return c<<chunkShift | b, true
	}
	if c, ok := d.nextNotFull(c + 1); ok {
		b, ok := d.chunks[c].nextFree(0)
		return c<<chunkShift | b, ok
	}
	return 0, false
}

// nextNotFull returns the first chunk at or after c that is not full.
func (d *dense) nextNotFull(c uint64) (uint64, bool) {
	g := c >> 6
	if g >= uint64(len(d.full)) {
		return 0, false
	}
	x := ^d.full[g] & (allOnes << (c & 63))
	for x == 0 {
		if g++; g >= uint64(len(d.full)) {
			return 0, false
		}
		x = ^d.full[g]
	}
	c = g<<6 | uint64(bits.TrailingZeros64(x))
	return c, c < uint64(len(d.chunks))
}

func (d *dense) each(fn func(i uint64) bool) {
	for c := range d.chunks {
		if d.chunks[c].n > 0 && !d.chunks[c].each(uint64(c)<<chunkShift, fn) {
			return
		}
	}
}

func (d *dense) reset() {
	for c := range d.chunks {
		d.chunks[c].init()
	}
	clear(d.full)
}
