package nodeipam

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/record"

	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
)

// poolAgent is what the model's agent of one node knows.
type poolAgent struct {
	alive    bool // the node's Node exists
	present  bool // its agent runs: its presence key is held
	want     map[string]int
	released map[netip.Prefix]bool // blocks it stopped using, until its grant lacks them
	// uses are the blocks in which the agent may hold addresses: every
	// block it saw in its grant and has not released, for as long as it
	// runs (a grant that loses a block does not empty it).
	uses map[netip.Prefix]bool
}

func newPoolAgent() *poolAgent {
	return &poolAgent{alive: true, present: true, want: map[string]int{}, released: map[netip.Prefix]bool{},
		uses: map[netip.Prefix]bool{}}
}

// TestPoolBlocksModel runs agents that claim and release at random, Nodes
// that go (with their agent, or while it runs on) and come back, agents
// that stop, servers restarted in the middle and writes that fail before
// or after they apply, against one etcd. Invariants: at no revision is a
// block in two grants; no block is ever used by two running agents (in
// the grant of one while the other may still hold addresses in it); once
// it settles, every grant's blocks are blocks of the ranges, of their
// family's size, at most maxBlocksPerNode per family, none the agent
// released; each node holds at least min(want, maxBlocksPerNode) per
// family unless the range is full; the server's book counts exactly the
// granted blocks; a node gone with its agent has neither grant nor claim,
// one whose agent runs on is fenced and keeps what it uses.
func TestPoolBlocksModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { runPoolModel(t, seed) })
	}
}

func runPoolModel(t *testing.T, seed uint64) {
	g := NewWithT(t)
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	names := []string{"n0", "n1", "n2", "n3", "n4", "n5"}
	r := newPoolRig(t, names...)
	r.events = &record.FakeRecorder{} // dropped
	r.log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := poolConfig("10.64.0.0/24", "fd00:64::/120")
	cfg.BlockSizeIPv4, cfg.BlockSizeIPv6, cfg.MaxBlocksPerNode = 28, 124, 4 // 16 blocks per family
	db := &faultyBroker{Broker: r.db, rnd: rand.New(rand.NewPCG(seed, 1)), rate: 10}
	agents := make(map[string]*poolAgent)
	for _, n := range names {
		agents[n] = newPoolAgent()
		agentUp(t, r.db, n)
	}
	srv := r.startOn(t, db, cfg, nil)
	restarts, toggles := 0, 0
	for range 400 {
		n := names[rnd.IntN(len(names))]
		a := agents[n]
		switch x := rnd.IntN(100); {
		case x < 3:
			g.Expect(srv.stop()).To(Succeed())
			srv = r.startOn(t, db, cfg, nil)
			restarts++
		case x < 7:
			toggles++
			r.toggleNode(t, n, a, rnd.IntN(2) == 0)
		case x < 9 && !a.alive && a.present: // the agent of a gone Node stops
			r.stopAgent(t, n, a)
		case a.present:
			r.agentStep(t, g, n, a, rnd, agents)
		}
		time.Sleep(time.Duration(rnd.IntN(2000)) * time.Microsecond)
	}
	t.Logf("seed %d: %d restarts, %d node deletes and re-creates", seed, restarts, toggles)
	// Last, a Node goes while its agent runs on with addresses in its
	// blocks: they must stay its own (checked when it settles).
	for _, n := range names {
		if a := agents[n]; a.alive && len(a.uses) > 0 {
			r.toggleNode(t, n, a, true)
			break
		}
	}

	db.stop()
	g.Eventually(func(g Gomega) {
		// The agents refresh their claims: released blocks their grant no
		// longer holds are dropped, and a claim deleted with an earlier
		// Node of that name is written again.
		for _, n := range names {
			a := agents[n]
			if !a.present {
				continue
			}
			a.keepReleased(r.grantBlocks(g, n))
			c := a.claim(n)
			kv, found, err := r.db.Get(context.Background(), claimKey(n))
			g.Expect(err).NotTo(HaveOccurred())
			if old, err := poolblock.ParseClaim(kv.Value); !found || err != nil || len(old.Release) != len(c.Release) {
				putClaim(t, r.db, c)
			}
		}
		checkPoolModel(g, r, srv, cfg, agents)
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	r.hist.check(t)
}

// toggleNode deletes n's Node (its agent stops too unless agentStays) or
// creates it again (with a new agent unless the old one still runs).
func (r *poolRig) toggleNode(t *testing.T, n string, a *poolAgent, agentStays bool) {
	if a.alive {
		r.deleteNode(t, n)
		a.alive = false
		if !agentStays {
			r.stopAgent(t, n, a)
		}
		return
	}
	r.createNode(t, n)
	if !a.present { // a new agent: it keeps giving back what the claim it finds gives back
		released := a.released
		*a = *newPoolAgent()
		a.released = released
		agentUp(t, r.db, n)
	}
	a.alive = true
}

// stopAgent stops n's agent: its presence key goes; it holds nothing. Its
// claim stays, with the blocks it gives back.
func (r *poolRig) stopAgent(t *testing.T, n string, a *poolAgent) {
	agentDown(t, r.db, n)
	*a = poolAgent{want: map[string]int{}, released: a.released, uses: map[netip.Prefix]bool{}}
}

// agentStep is one turn of n's running agent: it takes its grant into
// use (checking that no other running agent uses any of it), gives some
// blocks back and claims again.
func (r *poolRig) agentStep(t *testing.T, g Gomega, n string, a *poolAgent, rnd *rand.Rand, agents map[string]*poolAgent) {
	grant := r.grantBlocks(g, n)
	for _, b := range grant {
		if !a.released[b] {
			a.uses[b] = true
		}
	}
	checkUses(t, agents)
	for _, b := range grant {
		if rnd.IntN(4) == 0 {
			a.released[b] = true
			delete(a.uses, b) // it stops using a block before it lists it
		}
	}
	a.keepReleased(grant)
	a.want = map[string]int{"ipv4": rnd.IntN(6), "ipv6": rnd.IntN(6)}
	putClaim(t, r.db, a.claim(n))
}

// checkUses asserts that no block is used by two running agents.
func checkUses(t *testing.T, agents map[string]*poolAgent) {
	t.Helper()
	user := map[netip.Prefix]string{}
	for _, n := range slices.Sorted(maps.Keys(agents)) {
		a := agents[n]
		if !a.present {
			continue
		}
		for b := range a.uses {
			if o, ok := user[b]; ok {
				t.Fatalf("block %s is used by the running agents of %s and %s (alive: %v, %v)", b, o, n, agents[o].alive, a.alive)
			}
			user[b] = n
		}
	}
}

// keepReleased drops the released blocks that grant no longer holds.
func (a *poolAgent) keepReleased(grant []netip.Prefix) {
	held := make(map[netip.Prefix]bool, len(grant))
	for _, b := range grant {
		held[b] = true
	}
	for b := range a.released {
		if !held[b] {
			delete(a.released, b)
		}
	}
}

func (a *poolAgent) claim(node string) poolblock.Claim {
	c := poolblock.Claim{Node: node, Want: a.want}
	for b := range a.released {
		c.Release = append(c.Release, b)
	}
	return c
}

func (r *poolRig) grantBlocks(g Gomega, node string) []netip.Prefix {
	strs, _ := readGrant(g, r.db, node)
	return mustPrefixes(strs...)
}

// checkPoolModel asserts the settled invariants.
func checkPoolModel(g Gomega, r *poolRig, srv *poolServer, cfg PoolBlockConfig, agents map[string]*poolAgent) {
	ranges, err := cfg.Ranges()
	g.Expect(err).NotTo(HaveOccurred())
	granted := map[string]int{}
	short := map[string]bool{}
	fenced := map[string]bool{}
	for _, f := range srv.Status().Fenced {
		fenced[f.Node] = true
	}
	for n, a := range agents {
		blocks, found := readGrant(g, r.db, n)
		if !a.alive && !a.present {
			g.Expect(found).To(BeFalse(), "node %s is gone with its agent: no grant", n)
			g.Expect(r.exists(g, claimKey(n))).To(BeFalse(), "node %s is gone with its agent: no claim", n)
			continue
		}
		for b := range a.uses {
			g.Expect(blocks).To(ContainElement(b.String()), "node %s's agent uses %s: it stays in its grant", n, b)
		}
		if !a.alive {
			g.Expect(fenced[n] || len(blocks) == 0).To(BeTrue(), "node %s is gone while its agent runs: fenced", n)
			for _, s := range blocks {
				granted[poolblock.Family(netip.MustParsePrefix(s))]++
			}
			continue
		}
		count := map[string]int{}
		for _, s := range blocks {
			b := netip.MustParsePrefix(s)
			f := poolblock.Family(b)
			count[f]++
			granted[f]++
			g.Expect(a.released[b]).To(BeFalse(), "node %s holds %s, which it released", n, b)
			g.Expect(b.Masked()).To(Equal(b))
			g.Expect(slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(b.Addr()) })).To(BeTrue(), "%s in a range", b)
			g.Expect(b.Bits()).To(Equal(cfg.blockSize(b)), "%s of its family's block size", b)
		}
		for f, c := range count {
			g.Expect(c).To(BeNumerically("<=", cfg.MaxBlocksPerNode), "node %s, %s", n, f)
		}
		for f, w := range a.want {
			if count[f] < min(w, cfg.MaxBlocksPerNode) {
				short[f] = true
			}
		}
	}
	for _, u := range srv.Status().Ranges {
		f := poolblock.Family(netip.MustParsePrefix(u.ClusterCIDR))
		g.Expect(u.Used).To(Equal(uint64(granted[f])), "the book counts exactly the granted %s blocks", f)
		if short[f] {
			g.Expect(u.Free).To(BeZero(), "a node is short of %s blocks while some are free", f)
		}
	}
}
