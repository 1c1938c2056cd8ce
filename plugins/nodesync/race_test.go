package nodesync_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// racers is how many agents claim their IDs at the same moment.
const racers = 50

// TestRacingAgentsGetDistinctIDs runs 50 agents, each with its own etcd
// client, whose first resyncs claim IDs from one etcd at the same moment:
// distinct IDs within the compactness bound, no claim near the attempt
// bound, and a restarted agent finds its record.
func TestRacingAgentsGetDistinctIDs(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	plugins := make([]*nodesync.Plugin, racers)
	for i := range plugins {
		plugins[i] = newPlugin(t, fmt.Sprintf("node-%d", i+1), newDB(t, srv), &loop{})
	}

	start := make(chan struct{})
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i, p := range plugins {
		wg.Go(func() {
			<-start
			errs[i] = resync(p, nil)
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)

	ids := make([]uint32, racers)
	byName := map[string]uint32{}
	var attempts, conflicts, listings, worst int
	for i, p := range plugins {
		g.Expect(errs[i]).NotTo(HaveOccurred(), "node-%d", i+1)
		ids[i] = p.GetNodeID()
		byName[fmt.Sprintf("node-%d", i+1)] = ids[i]
		a, c, l := p.ClaimStats()
		attempts, conflicts, listings, worst = attempts+a, conflicts+c, listings+l, max(worst, a)
	}
	t.Logf("%d racers claimed in %v: %d transactions (%d lost), %d listings, at most %d transactions for one agent",
		racers, took, attempts, conflicts, listings, worst)
	g.Expect(worst).To(BeNumerically("<", nodesync.DefaultMaxClaimAttempts))

	// Distinct, and each within the documented bound: the other racers'
	// records plus the window of its own losses.
	for i, p := range plugins {
		_, c, _ := p.ClaimStats()
		_, _, w := p.ClaimLookup()
		g.Expect(int(ids[i])).To(BeNumerically("<=", racers-1+w), "node-%d lost %d, window %d", i+1, c, w)
	}
	slices.Sort(ids)
	g.Expect(slices.Compact(slices.Clone(ids))).To(HaveLen(racers), "distinct IDs")

	recs := records(t, newDB(t, srv))
	g.Expect(recs).To(HaveLen(racers))
	for id, rec := range recs {
		g.Expect(byName[rec.GetName()]).To(Equal(id), "the record of ID %d names its owner", id)
	}

	// node-17 restarts: a fresh agent with the same name keeps its ID.
	g.Expect(plugins[16].Close()).To(Succeed())
	again := newPlugin(t, "node-17", newDB(t, srv), &loop{})
	g.Expect(resync(again, nil)).To(Succeed())
	g.Expect(again.GetNodeID()).To(Equal(byName["node-17"]))
	attemptsAgain, _, listingsAgain := again.ClaimStats()
	g.Expect(attemptsAgain).To(BeZero())
	by, _, _ := again.ClaimLookup()
	g.Expect(by).To(Equal("index"), "found by its index, written with its record")
	g.Expect(listingsAgain).To(BeZero())
	g.Expect(records(t, newDB(t, srv))).To(HaveLen(racers), "no new ID")
}
