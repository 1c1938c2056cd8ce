package nodesync

import (
	"slices"
)

// MaxClaimWindow bounds the window a claim picks its candidate from after
// lost transactions: a claimed ID is at most the number of IDs taken by
// other nodes plus this window (see the package doc). It is reached after
// 10 lost transactions, so that a herd of thousands of nodes starting
// together spreads over enough IDs to converge in a few rounds.
const MaxClaimWindow = 1024

// MinClaimWindow is the window a claim may always grow to; beyond it the
// window grows only up to half the IDs its view knows taken, so that a
// herd spreads no wider than the cluster it is becoming: a node's ID is
// at most (IDs known taken) + max(MinClaimWindow, (IDs known taken)/2).
const MinClaimWindow = 32

// idView is one claim's knowledge of the taken node IDs: its latest
// listing plus the candidates it lost since (taken meanwhile by another
// node). Not safe for concurrent use: one claim owns it.
type idView struct {
	taken []uint32 // ascending, distinct, every one > 0
}

// newIDView returns the view of a listing's IDs (ascending, distinct).
func newIDView(taken []uint32) *idView { return &idView{taken: taken} }

// isTaken reports whether id is known to be taken.
func (v *idView) isTaken(id uint32) bool {
	_, found := slices.BinarySearch(v.taken, id)
	return found
}

// markTaken records that id was taken meanwhile (a lost transaction).
func (v *idView) markTaken(id uint32) {
	if i, found := slices.BinarySearch(v.taken, id); !found {
		v.taken = slices.Insert(v.taken, i, id)
	}
}

// firstFree appends to dst the k smallest positive IDs up to bound not
// known to be taken, ascending, and returns it; fewer when the IDs up to
// bound run out. The k-th free ID is at most len(v.taken) + k.
func (v *idView) firstFree(dst []uint32, k int, bound uint32) []uint32 {
	var c uint32
	i := 0
	for len(dst) < k && c < bound {
		c++
		for i < len(v.taken) && v.taken[i] < c {
			i++
		}
		if i < len(v.taken) && v.taken[i] == c {
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// window is how many of the smallest free IDs of the view a claim picks
// its next candidate from after it lost lost transactions: 1 (the
// smallest free ID) while it lost none, doubling with every loss, at most
// MaxClaimWindow. A node alone takes the smallest free ID; nodes that
// start together, and so all go for the same smallest free ID, spread
// over more IDs the more often they lose, so that each round of
// transactions is won by many of them instead of one.
func window(lost int) int {
	k := 1
	for ; lost > 0 && k < MaxClaimWindow; lost-- {
		k *= 2
	}
	return k
}

// cappedWindow is window(lost), at most max(MinClaimWindow, taken/2) for a
// view that knows taken IDs taken.
func cappedWindow(lost, taken int) int {
	return min(window(lost), max(MinClaimWindow, taken/4))
}
