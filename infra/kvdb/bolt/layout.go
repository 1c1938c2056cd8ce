package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
)

// bbolt's on-disk layout (go.etcd.io/bbolt v1.4, internal/common), read
// by our own decoder so that a file is checked with plain reads before
// bbolt maps it. bbolt writes its structs in the machine's byte order.
//
// Every page starts with a 16-byte header:
//
//	id u64 | flags u16 | count u16 | overflow u32
//
// overflow is the number of extra pages the page spans. Pages 0 and 1
// are the two meta pages; the meta follows the header:
//
//	magic u32 | version u32 | pageSize u32 | flags u32 |
//	root bucket: root page u64, sequence u64 |
//	freelist page u64 | high-water mark (pgid) u64 | txid u64 | checksum u64
//
// checksum is FNV-1a 64 of the 56 bytes before it. bbolt uses the valid
// meta page (magic, version, checksum) with the higher txid, else the
// other one. Branch and leaf pages hold count 16-byte elements after the
// header, whose pos is relative to the element's own offset:
//
//	branch: pos u32 | ksize u32 | child page u64
//	leaf:   flags u32 | pos u32 | ksize u32 | vsize u32
//
// A leaf element with the bucket flag holds a bucket: root page u64,
// sequence u64, and when the root page is 0 (an inline bucket) a leaf
// page inline after those 16 bytes. The freelist page holds count page
// ids (u64); a count of 0xFFFF means the real count is the first u64.
var order = binary.NativeEndian

const (
	pageHeaderSize = 16
	metaSize       = 64
	metaSumLen     = 56 // the meta bytes the checksum covers
	elemSize       = 16 // branch and leaf elements alike
	bucketHdrSize  = 16

	boltMagic   uint32 = 0xED0CDAED
	boltVersion uint32 = 2

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10

	leafFlagBucket = 0x01

	noFreelist      = ^uint64(0)
	freelistBigMark = 0xFFFF

	// Page sizes we accept: powers of two in [minPageSize, maxPageSize]
	// (bbolt searches the second meta page in the same range).
	minPageSize = 1 << 10
	maxPageSize = 1 << 24
)

// pageHeader is the header of one page.
type pageHeader struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
}

// parsePageHeader decodes the first pageHeaderSize bytes of b.
func parsePageHeader(b []byte) pageHeader {
	return pageHeader{
		id:       order.Uint64(b[0:8]),
		flags:    order.Uint16(b[8:10]),
		count:    order.Uint16(b[10:12]),
		overflow: order.Uint32(b[12:16]),
	}
}

// meta is the content of one meta page.
type meta struct {
	magic, version, pageSize, flags uint32
	root, sequence                  uint64
	freelist, pgid, txid, checksum  uint64
}

// parseMeta decodes a meta page: b starts at the page header and holds
// at least pageHeaderSize+metaSize bytes.
func parseMeta(b []byte) meta {
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	return meta{
		magic:    order.Uint32(m[0:4]),
		version:  order.Uint32(m[4:8]),
		pageSize: order.Uint32(m[8:12]),
		flags:    order.Uint32(m[12:16]),
		root:     order.Uint64(m[16:24]),
		sequence: order.Uint64(m[24:32]),
		freelist: order.Uint64(m[32:40]),
		pgid:     order.Uint64(m[40:48]),
		txid:     order.Uint64(m[48:56]),
		checksum: order.Uint64(m[56:64]),
	}
}

// metaSum computes the checksum of the meta page in b (as parseMeta).
func metaSum(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b[pageHeaderSize : pageHeaderSize+metaSumLen])
	return h.Sum64()
}

// validMeta checks what bbolt checks (magic, version, checksum, in that
// order) and that the page size is one we accept.
func validMeta(b []byte) (meta, error) {
	m := parseMeta(b)
	switch {
	case m.magic != boltMagic:
		return m, fmt.Errorf("magic %#08x is not bbolt's %#08x", m.magic, boltMagic)
	case m.version != boltVersion:
		return m, fmt.Errorf("format version %d, want %d", m.version, boltVersion)
	case m.checksum != metaSum(b):
		return m, fmt.Errorf("checksum %#016x does not match the content (%#016x)", m.checksum, metaSum(b))
	case !goodPageSize(uint64(m.pageSize)):
		return m, fmt.Errorf("%w: %d is not a power of two in [%d, %d]", errPageSize, m.pageSize, minPageSize, maxPageSize)
	}
	return m, nil
}

// errPageSize marks a meta page that bbolt would accept (magic, version
// and checksum hold) with a page size we cannot trust: bbolt would read
// the whole file with it, so such a file is refused outright.
var errPageSize = errors.New("bad page size")

func goodPageSize(n uint64) bool {
	return n >= minPageSize && n <= maxPageSize && bits.OnesCount64(n) == 1
}
