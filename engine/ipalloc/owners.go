package ipalloc

import "unsafe"

const (
	blockShift = 8               // an owner block covers 2^8 window indices
	blockSize  = 1 << blockShift // window indices per block
	blockMask  = blockSize - 1   // index of a window index inside its block
)

// ownerBlock holds the owner ids of blockSize consecutive window indices;
// id 0 is no owner.
type ownerBlock struct {
	ids [blockSize]uint32
	n   uint32 // non-zero ids
}

// owners maps window indices to the ids of the keys that own them. Only
// the blocks with an owner exist, and a block is dropped when its last
// owner goes, so memory follows what is owned, in both layouts: a dense
// pool finds its blocks in a slice indexed by block, a sparse pool in a
// map. A few dropped blocks are kept for reuse, so that churn at a block
// boundary allocates nothing.
type owners struct {
	dense  []*ownerBlock          // dense pools: by block, nil when empty
	sparse map[uint64]*ownerBlock // sparse pools
	spare  []*ownerBlock
	// lastB and last cache the block that set last, in a sparse pool:
	// next-fit assigns near the cursor. last is nil when nothing is cached.
	lastB uint64
	last  *ownerBlock
}

// newOwners returns the owner index of a window of span+1 indices, kept
// like the pool's bitmap: in a slice when it is dense, in a map otherwise.
func newOwners(span uint64, isSparse bool) owners {
	if isSparse {
		return owners{sparse: make(map[uint64]*ownerBlock)}
	}
	return owners{dense: make([]*ownerBlock, span>>blockShift+1)}
}

// block returns block b, nil if it has no owner.
func (o *owners) block(b uint64) *ownerBlock {
	if o.sparse == nil {
		if b < uint64(len(o.dense)) {
			return o.dense[b]
		}
		return nil
	}
	if o.last != nil && o.lastB == b {
		return o.last
	}
	return o.sparse[b]
}

// get returns the owner id of window index i, 0 if none.
func (o *owners) get(i uint64) uint32 {
	if blk := o.block(i >> blockShift); blk != nil {
		return blk.ids[i&blockMask]
	}
	return 0
}

// set makes id (not 0) the owner of window index i, which is inside the
// window, replacing any owner it has.
func (o *owners) set(i uint64, id uint32) {
	b := i >> blockShift
	blk := o.block(b)
	if blk == nil {
		blk = o.newBlock()
		if o.sparse == nil {
			o.dense[b] = blk
		} else {
			o.sparse[b] = blk
		}
	}
	if o.sparse != nil {
		o.lastB, o.last = b, blk
	}
	if blk.ids[i&blockMask] == 0 {
		blk.n++
	}
	blk.ids[i&blockMask] = id
}

// clear removes the owner of window index i, if any.
func (o *owners) clear(i uint64) {
	b := i >> blockShift
	blk := o.block(b)
	if blk == nil || blk.ids[i&blockMask] == 0 {
		return
	}
	blk.ids[i&blockMask] = 0
	if blk.n--; blk.n > 0 {
		return
	}
	if o.sparse == nil {
		o.dense[b] = nil
	} else {
		delete(o.sparse, b)
		if o.last == blk {
			o.last = nil
		}
	}
	if len(o.spare) < maxSpare {
		o.spare = append(o.spare, blk) // all ids are 0 again
	}
}

func (o *owners) newBlock() *ownerBlock {
	if n := len(o.spare); n > 0 {
		blk := o.spare[n-1]
		o.spare = o.spare[:n-1]
		return blk
	}
	return new(ownerBlock)
}

// blocks returns the number of blocks with an owner.
func (o *owners) blocks() int {
	if o.sparse != nil {
		return len(o.sparse)
	}
	n := 0
	for _, blk := range o.dense {
		if blk != nil {
			n++
		}
	}
	return n
}

// bytes returns the memory of the index: the blocks, the slice or an
// estimate of the map (a key, a value and a control byte per slot at a
// load of 7/8), the spare blocks.
func (o *owners) bytes() uintptr {
	blk := unsafe.Sizeof(ownerBlock{})
	n := uintptr(o.blocks()+len(o.spare))*blk + uintptr(cap(o.dense))*8
	if o.sparse != nil {
		n += uintptr(len(o.sparse)) * 17 * 8 / 7
	}
	return n
}

// reset removes every owner. The blocks are dropped, not kept for reuse.
func (o *owners) reset() {
	if o.sparse != nil {
		o.sparse = make(map[uint64]*ownerBlock) // a map keeps its size when cleared
	} else {
		clear(o.dense)
	}
	o.last = nil
}
