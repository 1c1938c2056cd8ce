package ipam_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// fakeClaimer records the claims the agent writes.
type fakeClaimer struct {
	mu     sync.Mutex
	claims []poolblock.Claim
}

func (c *fakeClaimer) PutClaim(_ context.Context, cl poolblock.Claim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims = append(c.claims, cl)
	return nil
}

func (c *fakeClaimer) last() (poolblock.Claim, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.claims) == 0 {
		return poolblock.Claim{}, 0
	}
	return c.claims[len(c.claims)-1], len(c.claims)
}

// grant delivers a grant of this node, as the DB watcher would.
func grant(g Gomega, i *ipam.Plugin, blocks ...string) {
	gr := poolblock.Grant{Node: thisNode}
	for _, b := range blocks {
		gr.Blocks = append(gr.Blocks, netip.MustParsePrefix(b))
	}
	raw, err := json.Marshal(gr)
	g.Expect(err).NotTo(HaveOccurred())
	var m map[string]any
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	v, err := structpb.NewStruct(m)
	g.Expect(err).NotTo(HaveOccurred())
	ev := &api.KubeStateChange{Resource: poolblock.GrantKeyword, Key: poolblock.GrantKey(thisNode), NewValue: v}
	g.Expect(i.HandlesEvent(ev)).To(BeTrue())
	_, err = i.Update(ev, nil)
	g.Expect(err).NotTo(HaveOccurred())
}

// Below the warm target the agent claims a block; the granted block is
// used once the first is full; empty for the block cooldown (after its
// addresses' cooldown), it is given back with a claim that releases it.
func TestElasticPoolsGrowAndShrink(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	claims := &fakeClaimer{}
	i := mustFixture(t, fixtureOpts{clock: clk, claims: claims, grace: 100 * time.Hour, conf: func(c *ipam.Config) {
		c.WarmTarget, c.BlockCooldown, c.AddressCooldown = 2, time.Minute, 30*time.Second
	}}, nil).ipam // 1.2.128.8/29: 4 pod addresses
	pods := make([]podmodel.ID, 6)
	for n := range pods {
		pods[n] = podmodel.ID{Name: "p" + string(rune('a'+n)), Namespace: "default"}
	}
	for _, p := range pods[:3] {
		_, err := addPod(i, p, att(p.Name, "eth0"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func() map[string]int { c, _ := claims.last(); return c.Want }).Should(Equal(map[string]int{"ipv4": 1}),
		"1 free address left, below the warm target of 2")
	_, sent := claims.last()

	grant(g, i, "1.2.200.0/29")
	for _, p := range pods[3:] {
		_, err := addPod(i, p, att(p.Name, "eth0"))
		g.Expect(err).NotTo(HaveOccurred(), "no ADD fails: the granted pool serves")
	}
	stats, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools).To(HaveLen(2))
	g.Expect(stats.Pools[1]).To(Equal(ipam.PoolStats{CIDR: "1.2.200.0/29", Family: ipam.IPv4, Total: 4, Assigned: 2, Free: 2}))
	c, n := claims.last()
	g.Expect(n).To(Equal(sent), "free is at the warm target again: no new claim")
	g.Expect(c.Want).To(Equal(map[string]int{"ipv4": 1}))

	// Shrink: the pods of the added pool go.
	for _, p := range pods[4:] {
		_, err := deletePod(i, p, att(p.Name, "eth0"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	clk.Advance(30 * time.Second) // the addresses' cooldown ends; the pool is empty from now
	g.Eventually(func() uint64 { s, _ := i.Stats(); return s.Cooldown }).Should(BeZero())
	clk.Advance(59 * time.Second)
	g.Consistently(func() int { s, _ := i.Stats(); return len(s.Pools) }, "50ms").Should(Equal(2), "not before its block cooldown")
	clk.Advance(2 * time.Second)
	g.Eventually(func() int { s, _ := i.Stats(); return len(s.Pools) }).Should(Equal(1))
	g.Eventually(func() poolblock.Claim { c, _ := claims.last(); return c }).Should(Equal(poolblock.Claim{
		Node: thisNode, Want: map[string]int{}, Release: []netip.Prefix{netip.MustParsePrefix("1.2.200.0/29")}}))

	// nodeipam's grant without the block ends the release.
	grant(g, i)
	g.Expect(i.AddPool(netip.MustParsePrefix("1.2.200.0/29"))).To(Succeed(), "the node holds it no more")
}

func TestStoreClaimerWritesTheClaimUnderTheKSRPrefix(t *testing.T) {
	g := NewWithT(t)
	db := openBolt(t, filepath.Join(t.TempDir(), "claims.db"))
	defer db.Close()
	c := poolblock.Claim{Node: "n1", Want: map[string]int{"ipv6": 2}}
	g.Expect(ipam.StoreClaimer{DB: db}.PutClaim(context.Background(), c)).To(Succeed())
	kv, found, err := db.Get(context.Background(), codec.KSRPrefix+poolblock.ClaimKey("n1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	got, err := poolblock.ParseClaim(kv.Value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Want).To(Equal(c.Want))
}

// With a claim pending, an ADD that finds the pools full is "try again
// later" (contiv-cni repeats it), not "pool exhausted"; once the block is
// granted it succeeds.
func TestAFullNodeWithAClaimPendingSaysTryAgain(t *testing.T) {
	g := NewWithT(t)
	claims := &fakeClaimer{}
	i := mustFixture(t, fixtureOpts{claims: claims, conf: func(c *ipam.Config) { c.WarmTarget = 2 }}, nil).ipam
	for n := range 4 {
		_, err := addPod(i, podmodel.ID{Name: fmt.Sprint("p", n), Namespace: "default"}, att(fmt.Sprint("c", n), "eth0"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := addPod(i, pod1, att("late", "eth0"))
	g.Expect(errors.Is(err, podmanager.ErrTryAgain)).To(BeTrue(), "%v", err)
	g.Expect(errors.Is(err, ipalloc.ErrPoolExhausted)).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring("a block is claimed from nodeipam"))
	grant(g, i, "1.2.200.0/29")
	_, err = addPod(i, pod1, att("late", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
}

// An added block restored empty at a restart is given back after its
// block cooldown, without any CNI call to wake the agent.
func TestAnEmptyBlockRestoredAtARestartIsGivenBack(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	conf := func(c *ipam.Config) { c.WarmTarget, c.BlockCooldown = 1, time.Minute }
	f := mustFixture(t, fixtureOpts{db: db, clock: clk, claims: &fakeClaimer{}, conf: conf}, nil)
	grant(g, f.ipam, "1.2.200.0/29")
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	t.Cleanup(func() { _ = db.Close() })
	claims := &fakeClaimer{}
	i := mustFixture(t, fixtureOpts{db: db, clock: clk, claims: claims, conf: conf}, nil).ipam
	s, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Pools).To(HaveLen(2))
	clk.Advance(time.Minute)
	g.Eventually(func() int { s, _ := i.Stats(); return len(s.Pools) }).Should(Equal(1))
	g.Eventually(func() []netip.Prefix { c, _ := claims.last(); return c.Release }).
		Should(Equal([]netip.Prefix{netip.MustParsePrefix("1.2.200.0/29")}))
}

// A grant that loses a block the node did not give back (nodeipam freed
// it: the Node was deleted) revokes it: nothing new comes from it, its
// allocations keep their addresses until released, the node claims again,
// and the block goes once empty.
func TestABlockTheGrantDropsIsRevoked(t *testing.T) {
	g := NewWithT(t)
	claims := &fakeClaimer{}
	i := mustFixture(t, fixtureOpts{claims: claims, conf: func(c *ipam.Config) { c.WarmTarget = 1 }}, nil).ipam
	grant(g, i, "1.2.200.0/29")
	for n := range 5 { // 4 in the node's own subnet, the fifth in the granted block
		_, err := addPod(i, podmodel.ID{Name: fmt.Sprint("p", n), Namespace: "default"}, att(fmt.Sprint("c", n), "eth0"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, sent := claims.last()
	grant(g, i) // the grant without the block
	s, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Pools[1]).To(Equal(ipam.PoolStats{CIDR: "1.2.200.0/29", Family: ipam.IPv4, Total: 4, Assigned: 1, Free: 3, Revoked: true}))
	_, err = addPod(i, pod1, att("new", "eth0"))
	g.Expect(err).To(HaveOccurred(), "nothing new from the revoked block")
	g.Eventually(func() int { _, n := claims.last(); return n }).Should(BeNumerically(">", sent), "the node claims again")
	c, _ := claims.last()
	g.Expect(c.Want).To(Equal(map[string]int{"ipv4": 1}))
	g.Expect(attIP(g, i, att("c4", "eth0"))).To(Equal("1.2.200.2/29"), "the allocation keeps its address")

	_, err = deletePod(i, podmodel.ID{Name: "p4", Namespace: "default"}, att("c4", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { s, _ := i.Stats(); return len(s.Pools) }).Should(Equal(1), "the empty revoked block goes")
}
