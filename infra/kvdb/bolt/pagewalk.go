package bolt

import (
	"bytes"
	"fmt"
	"io"
)

// maxTreeDepth bounds the nesting of pages and buckets the walk follows
// (a healthy bbolt tree is a few levels deep).
const maxTreeDepth = 64

// checkPages walks the whole file as bbolt would read it, with plain
// reads and bounds checks, so that what would make bbolt panic or fault
// later (a bad freelist, branch or leaf page, a key or child outside its
// page, a page reached twice) is found at open instead:
//   - the freelist page has the freelist type, and lists distinct pages
//     in [2, high-water mark);
//   - every page reachable from the root bucket is a branch or leaf page
//     whose header names it, inside the high-water mark, reached once and
//     not free; branch pages have children; every element, key and value
//     lies inside its page; keys are non-empty, strictly increasing and
//     within the range the parent branch gives; bucket values are sound
//     (inline ones hold a leaf page);
//   - with a persisted freelist, every page below the high-water mark is
//     either reachable or free (what bbolt's tx.Check also demands).
//
// rep must come from checkMeta (the file covers the high-water mark). It
// reads every page below the mark once; it never panics.
func checkPages(r io.ReaderAt, rep fileReport) error {
	hwm := rep.meta.pgid
	w := &pageWalk{r: r, ps: rep.pageSize, hwm: hwm, used: newBitset(hwm), free: newBitset(hwm)}
	w.used.set(0)
	w.used.set(1)
	if rep.meta.freelist != noFreelist {
		if err := w.freelist(rep.meta.freelist); err != nil {
			return err
		}
	}
	if err := w.node(rep.meta.root, 0, nil, nil); err != nil {
		return err
	}
	if rep.meta.freelist == noFreelist {
		return nil
	}
	for id := uint64(2); id < hwm; id++ {
		if !w.used.has(id) && !w.free.has(id) {
			return fmt.Errorf("page %d is neither reachable nor in the freelist", id)
		}
	}
	return nil
}

// pageWalk is the state of one checkPages call.
type pageWalk struct {
	r    io.ReaderAt
	ps   uint64
	hwm  uint64
	used bitset   // pages reached (meta, freelist, tree)
	free bitset   // pages the freelist lists
	bufs [][]byte // one page buffer per depth, reused
}

// buffer returns the buffer of depth, n bytes long.
func (w *pageWalk) buffer(depth int, n uint64) []byte {
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, nil)
	}
	if uint64(cap(w.bufs[depth])) < n {
		w.bufs[depth] = make([]byte, n)
	}
	return w.bufs[depth][:n]
}

// page reads page id, with its overflow pages, into the buffer of depth.
func (w *pageWalk) page(id uint64, depth int) ([]byte, pageHeader, error) {
	if id < 2 || id >= w.hwm {
		return nil, pageHeader{}, fmt.Errorf("page %d is outside [2, %d)", id, w.hwm)
	}
	buf := w.buffer(depth, w.ps)
	if _, err := w.r.ReadAt(buf, int64(id*w.ps)); err != nil {
		return nil, pageHeader{}, fmt.Errorf("page %d: %w", id, err)
	}
	h := parsePageHeader(buf)
	if h.id != id {
		return nil, pageHeader{}, fmt.Errorf("page %d: its header names page %d", id, h.id)
	}
	if uint64(h.overflow) >= w.hwm-id {
		return nil, pageHeader{}, fmt.Errorf("page %d: %d overflow pages run past the high-water mark %d", id, h.overflow, w.hwm)
	}
	if h.overflow > 0 {
		buf = w.buffer(depth, (uint64(h.overflow)+1)*w.ps)
		if _, err := w.r.ReadAt(buf, int64(id*w.ps)); err != nil {
			return nil, pageHeader{}, fmt.Errorf("page %d: %w", id, err)
		}
	}
	return buf, h, nil
}

// mark records page id and its overflow pages as in use by what.
func (w *pageWalk) mark(id uint64, overflow uint32, what string) error {
	for p := id; p <= id+uint64(overflow); p++ {
		switch {
		case w.used.has(p):
			return fmt.Errorf("page %d (%s) is reached twice", p, what)
		case w.free.has(p):
			return fmt.Errorf("page %d (%s) is in use and in the freelist", p, what)
		}
		w.used.set(p)
	}
	return nil
}

// freelist reads the freelist page id into w.free.
func (w *pageWalk) freelist(id uint64) error {
	buf, h, err := w.page(id, 0)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if h.flags != flagFreelist {
		return fmt.Errorf("freelist page %d has type %#x, want %#x", id, h.flags, flagFreelist)
	}
	if err := w.mark(id, h.overflow, "freelist"); err != nil {
		return err
	}
	body := buf[pageHeaderSize:]
	n, skip := uint64(h.count), uint64(0)
	if h.count == freelistBigMark {
		n, skip = order.Uint64(body), 1
	}
	if room := uint64(len(body))/8 - skip; n > room {
		return fmt.Errorf("freelist page %d lists %d pages, more than its %d bytes hold", id, n, len(body))
	}
	for i := skip; i < skip+n; i++ {
		p := order.Uint64(body[i*8:])
		switch {
		case p < 2 || p >= w.hwm:
			return fmt.Errorf("freelist page %d lists page %d, outside [2, %d)", id, p, w.hwm)
		case w.free.has(p):
			return fmt.Errorf("freelist page %d lists page %d twice", id, p)
		case w.used.has(p):
			return fmt.Errorf("freelist page %d lists itself (page %d)", id, p)
		}
		w.free.set(p)
	}
	return nil
}

// node checks the branch or leaf page id and everything below it; its
// keys must lie in [lo, hi) (nil: unbounded).
func (w *pageWalk) node(id uint64, depth int, lo, hi []byte) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("page %d: nested deeper than %d levels", id, maxTreeDepth)
	}
	buf, h, err := w.page(id, depth)
	if err != nil {
		return err
	}
	switch h.flags {
	case flagBranch:
		if err := w.mark(id, h.overflow, "branch"); err != nil {
			return err
		}
		return w.branch(id, buf, h.count, depth, lo, hi)
	case flagLeaf:
		if err := w.mark(id, h.overflow, "leaf"); err != nil {
			return err
		}
		return w.leaf(id, buf, h.count, depth, lo, hi)
	}
	return fmt.Errorf("page %d has type %#x, want a branch (%#x) or leaf (%#x) page", id, h.flags, flagBranch, flagLeaf)
}

// branch checks the elements of branch page id (in buf), then its
// children, each bounded by its key and the next one.
func (w *pageWalk) branch(id uint64, buf []byte, count uint16, depth int, lo, hi []byte) error {
	if count == 0 {
		return fmt.Errorf("page %d: a branch page without elements", id)
	}
	if err := fitElements(id, buf, count); err != nil {
		return err
	}
	keys := make([][]byte, count)
	for i := range keys {
		off := uint64(pageHeaderSize + i*elemSize)
		key, err := elemKey(id, i, buf, off+uint64(order.Uint32(buf[off:])), order.Uint32(buf[off+4:]))
		if err != nil {
			return err
		}
		var prev []byte
		if i > 0 {
			prev = keys[i-1]
		}
		if err := keyInOrder(id, i, key, prev, lo, hi); err != nil {
			return err
		}
		keys[i] = key
	}
	for i, key := range keys {
		next := hi
		if i+1 < len(keys) {
			next = keys[i+1]
		}
		child := order.Uint64(buf[pageHeaderSize+i*elemSize+8:])
		if err := w.node(child, depth+1, key, next); err != nil {
			return err
		}
	}
	return nil
}

// leaf checks the elements of leaf page id (in buf; id 0 is an inline
// bucket page) and the buckets they hold.
func (w *pageWalk) leaf(id uint64, buf []byte, count uint16, depth int, lo, hi []byte) error {
	if err := fitElements(id, buf, count); err != nil {
		return err
	}
	var prev []byte
	for i := range int(count) {
		off := uint64(pageHeaderSize + i*elemSize)
		flags, pos := order.Uint32(buf[off:]), uint64(order.Uint32(buf[off+4:]))
		ksize, vsize := order.Uint32(buf[off+8:]), uint64(order.Uint32(buf[off+12:]))
		if flags&^leafFlagBucket != 0 {
			return fmt.Errorf("%s: element %d has unknown flags %#x", pageName(id), i, flags)
		}
		key, err := elemKey(id, i, buf, off+pos, ksize)
		if err != nil {
			return err
		}
		if err := keyInOrder(id, i, key, prev, lo, hi); err != nil {
			return err
		}
		value, ok := span(buf, off+pos+uint64(ksize), vsize)
		if !ok {
			return fmt.Errorf("%s: element %d: its %d-byte value runs past the page end", pageName(id), i, vsize)
		}
		if flags&leafFlagBucket != 0 {
			if err := w.bucket(value, depth+1); err != nil {
				return fmt.Errorf("bucket %s: %w", quote(key), err)
			}
		}
		prev = key
	}
	return nil
}

// bucket checks a bucket value: a root page, or an inline leaf page.
func (w *pageWalk) bucket(value []byte, depth int) error {
	if len(value) < bucketHdrSize {
		return fmt.Errorf("a bucket value of %d bytes, want at least %d", len(value), bucketHdrSize)
	}
	if root := order.Uint64(value); root != 0 {
		return w.node(root, depth, nil, nil)
	}
	inline := value[bucketHdrSize:]
	if len(inline) < pageHeaderSize {
		return fmt.Errorf("an inline bucket of %d bytes, shorter than a page header", len(inline))
	}
	h := parsePageHeader(inline)
	if h.flags != flagLeaf {
		return fmt.Errorf("an inline bucket page of type %#x, want a leaf page (%#x)", h.flags, flagLeaf)
	}
	if depth > maxTreeDepth {
		return fmt.Errorf("buckets nested deeper than %d levels", maxTreeDepth)
	}
	return w.leaf(0, inline, h.count, depth, nil, nil)
}

// fitElements checks that count elements fit in the page.
func fitElements(id uint64, buf []byte, count uint16) error {
	if need := pageHeaderSize + int(count)*elemSize; need > len(buf) {
		return fmt.Errorf("%s: %d elements need %d bytes, the page has %d", pageName(id), count, need, len(buf))
	}
	return nil
}

// elemKey returns the non-empty key of element i at [start, start+ksize).
func elemKey(id uint64, i int, buf []byte, start uint64, ksize uint32) ([]byte, error) {
	if ksize == 0 {
		return nil, fmt.Errorf("%s: element %d has an empty key", pageName(id), i)
	}
	key, ok := span(buf, start, uint64(ksize))
	if !ok {
		return nil, fmt.Errorf("%s: element %d: its %d-byte key runs past the page end", pageName(id), i, ksize)
	}
	return key, nil
}

// keyInOrder checks that key (element i) sorts after prev (the key of
// element i-1; nil for the first) and lies in [lo, hi).
func keyInOrder(id uint64, i int, key, prev, lo, hi []byte) error {
	switch {
	case prev != nil && bytes.Compare(prev, key) >= 0:
		return fmt.Errorf("%s: element %d: key %s does not sort after %s", pageName(id), i, quote(key), quote(prev))
	case lo != nil && bytes.Compare(key, lo) < 0:
		return fmt.Errorf("%s: element %d: key %s sorts before %s, where its parent branch starts",
			pageName(id), i, quote(key), quote(lo))
	case hi != nil && bytes.Compare(key, hi) >= 0:
		return fmt.Errorf("%s: element %d: key %s does not sort before %s, the parent's next key",
			pageName(id), i, quote(key), quote(hi))
	}
	return nil
}

// span returns buf[start:start+n], or false when that leaves buf.
func span(buf []byte, start, n uint64) ([]byte, bool) {
	if start > uint64(len(buf)) || n > uint64(len(buf))-start {
		return nil, false
	}
	return buf[start : start+n], true
}

// quote quotes a key for an error message, cut after 64 bytes.
func quote(key []byte) string {
	const limit = 64
	if len(key) <= limit {
		return fmt.Sprintf("%q", key)
	}
	return fmt.Sprintf("%q... (%d bytes)", key[:limit], len(key))
}

func pageName(id uint64) string {
	if id == 0 {
		return "inline bucket page"
	}
	return fmt.Sprintf("page %d", id)
}

// bitset is a set of page ids.
type bitset []uint64

func newBitset(n uint64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i uint64)      { b[i/64] |= 1 << (i % 64) }
