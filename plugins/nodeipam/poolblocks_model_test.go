package nodeipam

import (
	"context"
	"fmt"
	"log/slog"
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
	alive    bool
	want     map[string]int
	released map[netip.Prefix]bool // blocks it stopped using, until its grant lacks them
}

// TestPoolBlocksModel runs agents that claim and release at random, Nodes
// that go and come back, servers restarted in the middle and writes that
// fail before or after they apply, against one etcd. Invariants: at no
// revision is a block in two grants; once it settles, every grant's
// blocks are blocks of the ranges, of their family's size, at most
// maxBlocksPerNode per family, none the agent released; each node holds
// at least min(want, maxBlocksPerNode) per family unless the range is
// full; the server's book counts exactly the granted blocks; the gone
// nodes have neither grant nor claim.
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
		agents[n] = &poolAgent{alive: true, want: map[string]int{}, released: map[netip.Prefix]bool{}}
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
			if a.alive {
				r.deleteNode(t, n)
				*a = poolAgent{want: map[string]int{}, released: map[netip.Prefix]bool{}}
			} else {
				r.createNode(t, n)
				a.alive = true
			}
		case a.alive:
			grant := r.grantBlocks(g, n)
			for _, b := range grant {
				if rnd.IntN(4) == 0 {
					a.released[b] = true
				}
			}
			a.keepReleased(grant)
			a.want = map[string]int{"ipv4": rnd.IntN(6), "ipv6": rnd.IntN(6)}
			putClaim(t, r.db, a.claim(n))
		}
		time.Sleep(time.Duration(rnd.IntN(2000)) * time.Microsecond)
	}
	t.Logf("seed %d: %d restarts, %d node deletes and re-creates", seed, restarts, toggles)

	db.stop()
	g.Eventually(func(g Gomega) {
		// The agents refresh their claims: released blocks their grant no
		// longer holds are dropped, and a claim deleted with an earlier
		// Node of that name is written again.
		for _, n := range names {
			a := agents[n]
			if !a.alive {
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
	for n, a := range agents {
		blocks, found := readGrant(g, r.db, n)
		if !a.alive {
			g.Expect(found).To(BeFalse(), "node %s is gone: no grant", n)
			g.Expect(r.exists(g, claimKey(n))).To(BeFalse(), "node %s is gone: no claim", n)
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
