package nodesync

import (
	"hash/fnv"
	"math/rand/v2"
	"slices"
)

// MaxClaimWindow bounds the window a claim picks its candidate from: a
// claimed ID is at most the number of IDs its view knows taken plus this
// window (see the package doc).
const MaxClaimWindow = 4096

// relistAfter lost transactions since the claim's last listing make it
// list again: its view is stale (the herd is larger than its window, or
// it listed long before its transactions ran). A herd's claims mostly
// win within a few transactions, so few ever list twice.
const relistAfter = 8

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
// its next candidate from after it lost lost transactions: first (at
// least 1) while it lost none, doubling with every loss, at most
// MaxClaimWindow. first is 1 in a quiet store, so a node alone takes the
// smallest free ID; in a herd it is the number of agents the store's
// activity says are claiming too (see activity), so a herd that starts
// together spreads at once over about as many IDs as it has members
// instead of all going for the same ID.
func window(first, lost int) int {
	k := min(max(first, 1), MaxClaimWindow)
	for ; lost > 0 && k < MaxClaimWindow; lost-- {
		k *= 2
	}
	return min(k, MaxClaimWindow)
}

// minClaimWindow is the window a claim may always grow to.
const minClaimWindow = 32

// cappedWindow is window(first, lost), at most max(minClaimWindow, 2 ×
// (taken + first)) for a view that knows taken IDs taken: a claim
// spreads no wider than twice the cluster it can see (the IDs it knows
// taken and the agents claiming with it). A view that stays too small is
// refreshed by listing again (relistAfter).
func cappedWindow(first, lost, taken int) int {
	return min(window(first, lost), max(minClaimWindow, 2*(taken+first)))
}

// activity estimates how many other agents are claiming: half the
// revisions committed between two reads of one claim, one round trip
// apart (revFrom, then revTo). Each agent of a herd has one request in
// flight, so the store commits about one write per agent per round trip,
// and an agent writes twice (its presence, then its record; lost
// transactions commit nothing), hence the half; a quiet store commits
// none.
func activity(revFrom, revTo int64) int {
	if revFrom <= 0 || revTo <= revFrom {
		return 0
	}
	return int(min((revTo-revFrom)/2, MaxClaimWindow))
}

// namePick returns the claim's choice of a candidate among n: a sequence
// of indexes seeded by a hash of the node name, the same for every claim
// of that name and different for different names, so that nodes with the
// same view spread over it instead of trying the same IDs.
func namePick(name string) func(n int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return rand.New(rand.NewPCG(h.Sum64(), 0x6e6f64652d696473)).IntN
}
