package nodesync_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// others are records of IDs 1..n naming other nodes.
func others(t *testing.T, n uint32) []kvdb.KeyValue {
	var out []kvdb.KeyValue
	for id := uint32(1); id <= n; id++ {
		out = append(out, record(t, &vppnode.VppNode{Id: id, Name: fmt.Sprintf("other-%d", id)}))
	}
	return out
}

// index is this node's index key valued with v.
func index(name, v string) kvdb.KeyValue {
	return kvdb.KeyValue{Key: nodesync.IndexPrefix + name, Value: []byte(v)}
}

// A node whose index points at its record takes that ID with two reads
// (the index, the record) and no listing.
func TestClaimFindsItsRecordByTheIndex(t *testing.T) {
	g := NewWithT(t)
	db := &fakeStore{listing: append(others(t, 30), index("node-x", "31"), index("node-xy", "5"),
		record(t, &vppnode.VppNode{Id: 31, Name: "node-x"}))}
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(31)))
	by, reads, _ := p.ClaimLookup()
	g.Expect(by).To(Equal("index"))
	g.Expect(reads).To(Equal(2))
	attempts, _, listings := p.ClaimStats()
	g.Expect(listings).To(BeZero(), "no listing")
	g.Expect(attempts).To(BeZero())
}

// A record written by an agent that predates the index (none, or one
// that does not point at a record naming this node) is found by the
// fallback listing, and the index is written then.
func TestClaimFindsAnUnindexedRecordByTheListing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		index []kvdb.KeyValue
	}{
		{name: "no index"},
		{name: "index at a record of another node", index: []kvdb.KeyValue{index("node-x", "3")}},
		{name: "index at no record", index: []kvdb.KeyValue{index("node-x", "99")}},
		{name: "index not an ID", index: []kvdb.KeyValue{index("node-x", "x7")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			db := &fakeStore{listing: append(append(others(t, 20), tc.index...),
				record(t, &vppnode.VppNode{Id: 21, Name: "node-x"}))}
			p := newPlugin(t, "node-x", db, &loop{})
			g.Expect(resync(p, nil)).To(Succeed())
			g.Expect(p.GetNodeID()).To(Equal(uint32(21)))
			by, _, _ := p.ClaimLookup()
			g.Expect(by).To(Equal("listing"))
			_, _, listings := p.ClaimStats()
			g.Expect(listings).To(Equal(1))
			g.Expect(db.puts).To(HaveKeyWithValue(nodesync.IndexPrefix+"node-x", "21"), "the index is written")
			g.Expect(db.txns).To(BeZero())
		})
	}
}

// A node that restarts with its stored ID finds its record with one read.
func TestClaimFindsItsRecordByTheStoredID(t *testing.T) {
	g := NewWithT(t)
	b := newBolt(t)
	g.Expect(b.Put(t.Context(), nodesync.NodeIDKey, []byte("12"))).To(Succeed())
	db := &fakeStore{listing: append(others(t, 11), record(t, &vppnode.VppNode{Id: 12, Name: "node-x"}))}
	p := newPlugin(t, "node-x", db, &loop{}, withLocalDB(b))
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(12)))
	by, reads, _ := p.ClaimLookup()
	g.Expect(by).To(Equal("stored ID"))
	g.Expect(reads).To(Equal(1))
	_, _, listings := p.ClaimStats()
	g.Expect(listings).To(BeZero())
}

// Lost races are refreshed locally (the lost ID is marked taken), never
// by a listing, until relistAfter (8) losses since the last listing.
func TestClaimLostRacesDoNotList(t *testing.T) {
	for _, tc := range []struct{ lose, listings int }{{1, 1}, {7, 1}, {8, 2}, {9, 2}} {
		t.Run(fmt.Sprintf("lose %d", tc.lose), func(t *testing.T) {
			g := NewWithT(t)
			db := &fakeStore{txnOK: true, lose: tc.lose, listing: others(t, 5)}
			p := newPlugin(t, "node-x", db, &loop{})
			g.Expect(resync(p, nil)).To(Succeed())
			g.Expect(p.GetNodeID()).To(BeNumerically(">", 5))
			attempts, conflicts, listings := p.ClaimStats()
			g.Expect(attempts).To(Equal(tc.lose + 1))
			g.Expect(conflicts).To(Equal(tc.lose))
			g.Expect(listings).To(Equal(tc.listings))
		})
	}
}
