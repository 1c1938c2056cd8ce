package nodesync_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

func smallest(int) int  { return 0 }
func largest(n int) int { return n - 1 }

// A claim that loses a transaction never tries that ID again and picks
// its next candidate among the smallest free IDs of a window that doubles
// with every loss.
func TestClaimAfterALostRaceTriesAnotherCandidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		pick func(int) int
		lose int
		want uint32
	}{
		{name: "no loss: the smallest free ID", pick: largest, lose: 0, want: 3},
		{name: "one loss, smallest of the window", pick: smallest, lose: 1, want: 5},
		{name: "one loss, largest of the window {5, 6}", pick: largest, lose: 1, want: 6},
		// lost 3, then 6 (largest of {5, 6}), then the window {5, 7, 8, 9}
		{name: "two losses, largest of the window", pick: largest, lose: 2, want: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			db := &fakeStore{txnOK: true, lose: tc.lose}
			for _, id := range []uint32{1, 2, 4} {
				db.listing = append(db.listing, record(t, &vppnode.VppNode{Id: id, Name: fmt.Sprintf("other-%d", id)}))
			}
			p := newPlugin(t, "node-x", db, &loop{}, nodesync.UsePick(tc.pick))
			g.Expect(resync(p, nil)).To(Succeed())
			g.Expect(p.GetNodeID()).To(Equal(tc.want))
			attempts, conflicts, listings := p.ClaimStats()
			g.Expect(attempts).To(Equal(tc.lose + 1))
			g.Expect(conflicts).To(Equal(tc.lose))
			g.Expect(listings).To(Equal(1), "no listing again before the twelfth loss")
		})
	}
}

// The first window is the store's write activity during the lookups (1 in
// a quiet store: the smallest free ID); it doubles with every loss up to
// MaxClaimWindow.
func TestClaimWindowStartsAtTheActivityAndDoubles(t *testing.T) {
	for _, tc := range []struct {
		name              string
		first, lost, want int
	}{
		{name: "quiet store, no loss: the smallest free ID", first: 0, lost: 0, want: 1},
		{name: "quiet store, 3 losses", first: 1, lost: 3, want: 8},
		{name: "herd of about 300, no loss", first: 300, lost: 0, want: 300},
		{name: "herd of about 300, 2 losses", first: 300, lost: 2, want: 1200},
		{name: "beyond the bound", first: 300, lost: 20, want: nodesync.MaxClaimWindow},
		{name: "the activity capped", first: 1 << 20, lost: 0, want: nodesync.MaxClaimWindow},
		{name: "the attempt bound of losses", first: 1, lost: nodesync.DefaultMaxClaimAttempts, want: nodesync.MaxClaimWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(nodesync.Window(tc.first, tc.lost)).To(Equal(tc.want))
		})
	}
}

// The window never exceeds twice the cluster the claim can see (IDs known
// taken and agents claiming), nor less than 32.
func TestClaimWindowIsCappedByTheClusterItSees(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct{ first, lost, taken, want int }{
		{0, 0, 0, 1},
		{0, 6, 0, 32},      // 64, capped at 32
		{0, 6, 200, 64},    // 64 < 2 × 200
		{100, 3, 0, 200},   // 800, capped at 2 × 100
		{100, 3, 300, 800}, // 800 < 2 × 400
		{1000, 5, 9000, nodesync.MaxClaimWindow},
	} {
		g.Expect(nodesync.CappedWindow(tc.first, tc.lost, tc.taken)).To(Equal(tc.want), "%+v", tc)
	}
}

// The activity is the revisions committed between two reads, 0 when none
// (or when the revisions are unknown or went back: a replaced store).
func TestClaimActivityCountsTheRevisionsBetweenTheReads(t *testing.T) {
	g := NewWithT(t)
	g.Expect(nodesync.Activity(100, 100)).To(Equal(0))
	g.Expect(nodesync.Activity(100, 350)).To(Equal(125), "two writes per agent")
	g.Expect(nodesync.Activity(0, 350)).To(Equal(0), "no first revision")
	g.Expect(nodesync.Activity(350, 100)).To(Equal(0), "went back")
	g.Expect(nodesync.Activity(1, 1<<40)).To(Equal(nodesync.MaxClaimWindow))
}

// The default pick is a sequence per node name: the same for every claim
// of one name, different for two names.
func TestClaimPickIsAFunctionOfTheName(t *testing.T) {
	g := NewWithT(t)
	seq := func(name string) []int {
		pick := nodesync.NamePick(name)
		out := make([]int, 16)
		for i := range out {
			out[i] = pick(1000)
		}
		return out
	}
	g.Expect(seq("node-a")).To(Equal(seq("node-a")))
	g.Expect(seq("node-a")).NotTo(Equal(seq("node-b")))
	for _, i := range seq("node-a") {
		g.Expect(i).To(BeNumerically(">=", 0))
		g.Expect(i).To(BeNumerically("<", 1000))
	}
}

// Candidates stay within the compactness bound: after lost losses the
// candidate is among the window(lost) smallest IDs not known taken, so it
// is at most (IDs known taken) + window(lost), whatever the pick.
func TestClaimCandidatesStayWithinTheWindow(t *testing.T) {
	g := NewWithT(t)
	const lose = 6
	db := &fakeStore{txnOK: true, lose: lose}
	taken := []uint32{1, 2, 3, 5, 8, 13, 21, 34}
	for _, id := range taken {
		db.listing = append(db.listing, record(t, &vppnode.VppNode{Id: id, Name: "other"}))
	}
	p := newPlugin(t, "node-x", db, &loop{}, nodesync.UsePick(largest))
	g.Expect(resync(p, nil)).To(Succeed())
	_, _, w := p.ClaimLookup()
	g.Expect(w).To(Equal(nodesync.CappedWindow(0, lose, len(taken)+lose)))
	g.Expect(p.GetNodeID()).To(BeNumerically("<=", uint32(len(taken)+lose+w)))
	// lost 4, 7, 11, 17, 27, 45 (each the largest of its window); then the
	// window is 2^6 = 64 capped at 32 (14 IDs known taken is too few to
	// go wider): the 32nd ID not among the 14, all below it: 46.
	g.Expect(p.GetNodeID()).To(Equal(uint32(46)))
}

// A listing decodes only the values that may name this node: its own
// record is found among many without decoding the others.
func TestClaimFindsItsRecordWithoutDecodingOthers(t *testing.T) {
	g := NewWithT(t)
	db := &fakeStore{}
	for id := uint32(1); id <= 200; id++ {
		name := fmt.Sprintf("other-%d", id)
		if id == 77 {
			name = "node-x"
		}
		db.listing = append(db.listing, record(t, &vppnode.VppNode{Id: id, Name: name}))
	}
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(77)))
	g.Expect(p.ClaimDecodes()).To(Equal(1))
	g.Expect(db.txns).To(BeZero())
}

// A value whose name is escaped (legal JSON, not what codec writes) is
// decoded all the same: a backslash makes a value a candidate.
func TestClaimFindsAnEscapedRecord(t *testing.T) {
	g := NewWithT(t)
	db := &fakeStore{listing: []kvdb.KeyValue{
		record(t, &vppnode.VppNode{Id: 1, Name: "other"}),
		{Key: codec.KSRPrefix + vppnode.Key(2), Value: []byte(`{"id":2,"name":"node-\u0078"}`)},
	}}
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(2)))
	g.Expect(p.ClaimDecodes()).To(Equal(1))
}

// TestHerdClaimsDistinctCompactIDs: 150 agents, 10 per etcd connection,
// claim at once with the real random pick: distinct IDs, none gives up,
// and each ID is within the documented bound (others' records +
// window(its losses)).
func TestHerdClaimsDistinctCompactIDs(t *testing.T) {
	g := NewWithT(t)
	const n, perConn = 150, 10
	srv := etcdtest.Start(t)
	ps := make([]*nodesync.Plugin, n)
	for i := range ps {
		if i%perConn == 0 {
			db := newDB(t, srv)
			for j := i; j < i+perConn; j++ {
				ps[j] = newPlugin(t, fmt.Sprintf("herd-%03d", j), db, &loop{})
			}
		}
	}
	errs := runAtOnce(ps)
	seen := map[uint32]int{}
	for i, p := range ps {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		id := p.GetNodeID()
		g.Expect(id).NotTo(BeZero())
		_, conflicts, _ := p.ClaimStats()
		_, _, w := p.ClaimLookup()
		g.Expect(int(id)).To(BeNumerically("<=", n-1+w), "herd-%03d lost %d, window %d", i, conflicts, w)
		seen[id]++
	}
	g.Expect(seen).To(HaveLen(n), "distinct IDs")
}

// withBound gives the plugin a node-ID bound, as the agent does from
// ipam.MaxNodeID.
func withBound(b uint32) nodesync.Option {
	return nodesync.UseDeps(func(d *nodesync.Deps) { d.MaxNodeID = func() uint32 { return b } })
}

// A claim never tries an ID above the bound the IPAM config sets, however
// wide its window has grown: here the window after 6 losses would reach
// past 46 (TestClaimCandidatesStayWithinTheWindow), the bound is 12.
func TestAClaimStaysWithinTheNodeIDBound(t *testing.T) {
	g := NewWithT(t)
	db := &fakeStore{txnOK: true, lose: 6}
	for _, id := range []uint32{1, 2, 3, 5, 8} {
		db.listing = append(db.listing, record(t, &vppnode.VppNode{Id: id, Name: "other"}))
	}
	p := newPlugin(t, "node-x", db, &loop{}, nodesync.UsePick(largest), withBound(12))
	g.Expect(resync(p, nil)).To(Succeed())
	// lost 4, 7, 11, 12, 10, 9 (the largest free of each window up to
	// 12); then the only ID left up to 12: 6.
	g.Expect(p.GetNodeID()).To(Equal(uint32(6)))
}

// When every ID up to the bound is taken the claim fails without trying
// an ID above it and is retried later, as when etcd does not answer
// (contiv-ksr frees the IDs of deleted Nodes meanwhile).
func TestAClaimWaitsWhenEveryIDUpToTheBoundIsTaken(t *testing.T) {
	g := NewWithT(t)
	db := &fakeStore{txnOK: true}
	for _, id := range []uint32{1, 2, 3} {
		db.listing = append(db.listing, record(t, &vppnode.VppNode{Id: id, Name: "other"}))
	}
	l := &loop{}
	p := newPlugin(t, "node-x", db, l, withBound(3))
	g.Expect(resync(p, nil)).To(Succeed(), "not fatal")
	g.Expect(p.GetNodeID()).To(BeZero())
	g.Eventually(l.retries).WithTimeout(5*time.Second).Should(BeNumerically(">=", 1), "a retry is pushed")
	db.mu.Lock()
	defer db.mu.Unlock()
	g.Expect(db.txns).To(BeZero(), "no ID above the bound was tried")
}

// A bound of 0 (or none) leaves IDs bounded only by 2^32-1.
func TestAZeroBoundIsNoBound(t *testing.T) {
	g := NewWithT(t)
	db := &fakeStore{txnOK: true}
	for _, id := range []uint32{1, 2, 3} {
		db.listing = append(db.listing, record(t, &vppnode.VppNode{Id: id, Name: "other"}))
	}
	p := newPlugin(t, "node-x", db, &loop{}, withBound(0))
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(4)))
}
