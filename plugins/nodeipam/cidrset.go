package nodeipam

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/engine/cidr"
	"github.com/contiv-ipam/agent/engine/ipalloc"
)

// MaxIndexBits is the largest difference between a cluster range's length
// and the node mask size: the blocks are counted with 64-bit indices.
// (Kubernetes' cidrset allows at most 16 for IPv6.)
const MaxIndexBits = 64

// maxOccupyBlocks bounds the blocks one Occupy or Release may touch: a
// node CIDR much larger than the node mask size is refused rather than
// walked block by block.
const maxOccupyBlocks = 1 << 16

// maxExcludedBlocks bounds the blocks the excluded ranges may cover.
const maxExcludedBlocks = 1 << 24

// Sentinel errors of CIDRSet.
var (
	// ErrNoCIDRsRemaining means that every block of the cluster range is
	// taken (or excluded).
	ErrNoCIDRsRemaining = errors.New("no CIDRs left in the cluster range")
	// ErrOutsideCluster means that a CIDR does not overlap the cluster
	// range.
	ErrOutsideCluster = errors.New("CIDR outside the cluster range")
)

// CIDRSet hands out the node-sized blocks of one cluster range, next-fit,
// the way Kubernetes' cidrset does; it is an ipalloc.Pool over the block
// indices (block i is the i-th subnet of the node mask size). Blocks that
// overlap an excluded range (the service CIDR) are never handed out.
// It is not safe for concurrent use: its owner serialises the calls.
type CIDRSet struct {
	cluster  netip.Prefix
	maskSize int
	pool     *ipalloc.Pool
}

// NewCIDRSet returns the blocks of maskSize bits of cluster, without those
// overlapping any of exclude (which may be of any family and size: the
// ones that do not overlap are ignored). The error names the cluster range
// and the mask size when they do not fit, and says so when exclude covers
// every block.
func NewCIDRSet(cluster netip.Prefix, maskSize int, exclude ...netip.Prefix) (*CIDRSet, error) {
	if !cluster.IsValid() {
		return nil, fmt.Errorf("cluster CIDR %q is not valid", cluster.String())
	}
	cluster = cluster.Masked()
	if maskSize < cluster.Bits() || maskSize > cluster.Addr().BitLen() {
		return nil, fmt.Errorf("node mask size %d for cluster CIDR %s: want %d to %d",
			maskSize, cluster, cluster.Bits(), cluster.Addr().BitLen())
	}
	bits := maskSize - cluster.Bits()
	if bits > MaxIndexBits {
		return nil, fmt.Errorf("node mask size %d for cluster CIDR %s: %d bits of blocks, want at most %d",
			maskSize, cluster, bits, MaxIndexBits)
	}
	s := &CIDRSet{cluster: cluster, maskSize: maskSize}
	reserved, err := s.excluded(exclude)
	if err != nil {
		return nil, err
	}
	pool, err := ipalloc.New(ipalloc.Config{Prefix: indexSpace(bits), Reserved: reserved})
	if err != nil {
		return nil, fmt.Errorf("cluster CIDR %s, node mask size %d: the excluded ranges %v cover every block",
			cluster, maskSize, exclude)
	}
	s.pool = pool
	return s, nil
}

// indexSpace is the prefix whose offsets are the block indices: an IPv6
// prefix with bits host bits. ipalloc counts offsets from its first
// address, so offset i is block i.
func indexSpace(bits int) netip.Prefix {
	return netip.PrefixFrom(netip.IPv6Unspecified(), 128-bits)
}

// indexAddr is the address at offset i of the index space.
func indexAddr(i uint64) netip.Addr {
	a, _ := cidr.Add(netip.IPv6Unspecified(), i)
	return a
}

// excluded returns the index-space addresses of the blocks that overlap
// the ranges of exclude.
func (s *CIDRSet) excluded(exclude []netip.Prefix) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, p := range exclude {
		if !p.IsValid() || !p.Overlaps(s.cluster) {
			continue
		}
		first, last, err := s.blocks(p, maxExcludedBlocks)
		if err != nil {
			return nil, fmt.Errorf("excluded range %s: %w", p, err)
		}
		for i := first; ; i++ {
			out = append(out, indexAddr(i))
			if i == last {
				break
			}
		}
	}
	return out, nil
}

// ClusterCIDR returns the cluster range.
func (s *CIDRSet) ClusterCIDR() netip.Prefix { return s.cluster }

// MaskSize returns the node mask size.
func (s *CIDRSet) MaskSize() int { return s.maskSize }

// AllocateNext hands out the first free block after the last one handed
// out (wrapping around); the error wraps ErrNoCIDRsRemaining when none is
// free.
func (s *CIDRSet) AllocateNext() (netip.Prefix, error) {
	i, err := s.pool.AllocateOffset()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("allocate a /%d in %s (%d blocks): %w",
			s.maskSize, s.cluster, s.pool.Size(), ErrNoCIDRsRemaining)
	}
	return s.Block(i), nil
}

// Block returns block i.
func (s *CIDRSet) Block(i uint64) netip.Prefix {
	p, _ := cidr.Subnet(s.cluster, s.maskSize, i)
	return p
}

// Occupy marks the blocks that p covers as taken (the block holding p
// when p is smaller than a block). Blocks already taken or excluded are
// left as they are. It returns how many blocks it took; the error wraps
// ErrOutsideCluster when p does not overlap the cluster range.
func (s *CIDRSet) Occupy(p netip.Prefix) (int, error) {
	return s.each(p, "occupy", func(i uint64) bool { return s.pool.AllocateAtOffset(i) == nil })
}

// Release frees the blocks that p covers; free and excluded ones are left
// as they are. It returns how many blocks it freed.
func (s *CIDRSet) Release(p netip.Prefix) (int, error) {
	return s.each(p, "release", func(i uint64) bool { return s.pool.ReleaseOffset(i) == nil })
}

// IsTaken reports whether block i is allocated.
func (s *CIDRSet) IsTaken(i uint64) bool { return s.pool.IsAllocated(indexAddr(i)) }

// Index returns the block that holds p's first address, and whether p is
// exactly that block.
func (s *CIDRSet) Index(p netip.Prefix) (i uint64, exact bool, err error) {
	if !p.IsValid() || !s.cluster.Contains(p.Masked().Addr()) {
		return 0, false, fmt.Errorf("%s in %s: %w", p, s.cluster, ErrOutsideCluster)
	}
	i, err = cidr.SubnetIndex(s.cluster, s.maskSize, p.Masked().Addr())
	if err != nil {
		return 0, false, err
	}
	return i, p.Bits() == s.maskSize && p.Masked() == p, nil
}

// each calls fn on every block p covers and counts the trues.
func (s *CIDRSet) each(p netip.Prefix, op string, fn func(i uint64) bool) (int, error) {
	first, last, err := s.blocks(p, maxOccupyBlocks)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", op, p, err)
	}
	n := 0
	for i := first; ; i++ {
		if fn(i) {
			n++
		}
		if i == last {
			return n, nil
		}
	}
}

// blocks returns the first and last block that p covers, at most limit of
// them.
func (s *CIDRSet) blocks(p netip.Prefix, limit uint64) (first, last uint64, err error) {
	if !p.IsValid() || !p.Overlaps(s.cluster) {
		return 0, 0, fmt.Errorf("%s is not inside %s: %w", p, s.cluster, ErrOutsideCluster)
	}
	p = p.Masked()
	if p.Bits() <= s.cluster.Bits() {
		return 0, s.indexCount() - 1, s.checkCount(p, s.indexCount(), limit)
	}
	first, err = cidr.SubnetIndex(s.cluster, s.maskSize, p.Addr())
	if err != nil {
		return 0, 0, err
	}
	last, err = cidr.SubnetIndex(s.cluster, s.maskSize, cidr.Last(p))
	if err != nil {
		return 0, 0, err
	}
	return first, last, s.checkCount(p, last-first+1, limit)
}

func (s *CIDRSet) checkCount(p netip.Prefix, n, limit uint64) error {
	if n == 0 || n > limit { // 0: 2^64 blocks
		return fmt.Errorf("%s covers more than %d blocks of /%d", p, limit, s.maskSize)
	}
	return nil
}

// indexCount is the number of blocks (0 for 2^64).
func (s *CIDRSet) indexCount() uint64 {
	bits := s.maskSize - s.cluster.Bits()
	if bits >= 64 {
		return 0
	}
	return uint64(1) << bits
}

// Size returns the number of blocks that can be handed out (excluded ones
// not counted).
func (s *CIDRSet) Size() uint64 { return s.pool.Size() }

// Used returns the number of blocks taken.
func (s *CIDRSet) Used() uint64 { return s.pool.Used() }

// Free returns Size() - Used().
func (s *CIDRSet) Free() uint64 { return s.pool.Free() }
