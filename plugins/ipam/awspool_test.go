package ipam_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// addrs parses addresses.
func addrs(ss ...string) []netip.Addr {
	out := []netip.Addr{}
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// fillNodeSubnet takes the four pod addresses of 1.2.128.8/29 (the
// default test node's own subnet), so that the next ones come from the
// added pools.
func fillNodeSubnet(g Gomega, i *ipam.Plugin) {
	for n := range 4 {
		id := podmodel.ID{Name: "own" + string(rune('a'+n)), Namespace: "default"}
		mustAdd(g, i, id, att("own"+string(rune('a'+n)), "eth0"))
	}
}

// A pool added empty hands out only the addresses added to it; an
// address is added once, deleted once, refused while assigned unless
// forced; the pool's addresses survive a restart.
func TestAPoolAddedEmptyTakesAddressesOneByOne(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{db: db}, nil) // 1.2.128.8/29: pods .10 to .13
	i := f.ipam
	eni := netip.MustParsePrefix("1.2.200.0/29") // .2 to .5
	g.Expect(i.AddEmptyPool(eni)).To(Succeed())
	g.Expect(i.AddPool(eni)).To(MatchError(ipam.ErrDuplicatePool))
	g.Expect(i.AddEmptyPool(eni)).To(MatchError(ContainSubstring("adding pool 1.2.200.0/29: the node has this pool already")))
	g.Expect(i.AddPool(netip.MustParsePrefix("1.2.128.8/29"))).To(MatchError(ipam.ErrDuplicatePool))
	g.Expect(i.AddPool(netip.MustParsePrefix("1.2.200.0/28"))).To(MatchError(ContainSubstring("overlaps the pod subnet 1.2.200.0/29")))
	g.Expect(i.AddEmptyPool(netip.MustParsePrefix("1.3.0.0/16"))).To(MatchError(ContainSubstring("more than 2^12 addresses")))

	in, err := i.PoolAddresses(eni)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in).To(BeEmpty())
	stats, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools[1]).To(Equal(ipam.PoolStats{CIDR: "1.2.200.0/29", Family: ipam.IPv4, Total: 4, Excluded: 4}),
		"the addresses not in the pool count as excluded")

	fillNodeSubnet(g, i)
	_, err = addPod(i, pod1, att("c1", "eth0"))
	g.Expect(err).To(MatchError(ContainSubstring("no IP address is free")), "the empty pool has nothing to hand out")

	g.Expect(i.AddPoolAddress(eni, netip.MustParseAddr("1.2.200.4"))).To(Succeed())
	g.Expect(i.AddPoolAddress(eni, netip.MustParseAddr("1.2.200.4"))).To(MatchError(ipam.ErrAddressInPool))
	g.Expect(i.AddPoolAddress(eni, netip.MustParseAddr("1.2.200.1"))).To(MatchError(ipalloc.ErrReserved))
	g.Expect(i.AddPoolAddress(eni, netip.MustParseAddr("1.2.200.1"))).To(MatchError(ContainSubstring("is the gateway of the pool")))
	g.Expect(i.AddPoolAddress(eni, netip.MustParseAddr("1.2.201.4"))).To(MatchError(ipalloc.ErrOutOfRange))
	g.Expect(i.AddPoolAddress(netip.MustParsePrefix("1.2.128.8/29"), netip.MustParseAddr("1.2.128.10"))).
		To(MatchError(ContainSubstring("cut from the node ID")))
	g.Expect(i.AddPoolAddress(netip.MustParsePrefix("1.2.210.0/29"), netip.MustParseAddr("1.2.210.2"))).To(MatchError(ipam.ErrNoSuchPool))

	ev, err := addPod(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ips(ev)[0]).To(Equal("1.2.200.4/29 gw 1.2.200.1"), "the one address added")
	g.Expect(i.AddPoolAddress(eni, netip.MustParseAddr("1.2.200.2"))).To(Succeed())
	in, err = i.PoolAddresses(eni)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in).To(Equal(addrs("1.2.200.2", "1.2.200.4")))
	free, err := i.FreeableIPs(eni)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal(addrs("1.2.200.2")))

	// Delete: refused while assigned, unknown once deleted.
	_, err = i.DelPoolAddress(eni, netip.MustParseAddr("1.2.200.4"), false)
	g.Expect(err).To(MatchError(ipam.ErrAddressInUse))
	g.Expect(err).To(MatchError(ContainSubstring("attachment net/c1/eth0 of pod default/pod1 holds 1.2.200.4")))
	_, err = i.DelPoolAddress(eni, netip.MustParseAddr("1.2.200.3"), false)
	g.Expect(err).To(MatchError(ipam.ErrAddressNotInPool))
	released, err := i.DelPoolAddress(eni, netip.MustParseAddr("1.2.200.2"), false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(released).To(BeEmpty())

	// A restart keeps the pool as it is.
	f.close(t)
	g.Expect(db.Close()).To(Succeed())
	db = openBolt(t, path)
	t.Cleanup(func() { _ = db.Close() })
	i = mustFixture(t, fixtureOpts{db: db}, nil).ipam
	in, err = i.PoolAddresses(eni)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in).To(Equal(addrs("1.2.200.4")))
	g.Expect(attIP(g, i, att("c1", "eth0"))).To(Equal("1.2.200.4/29"))

	// Forced: the allocation goes with the address.
	released, err = i.DelPoolAddress(eni, netip.MustParseAddr("1.2.200.4"), true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(released).To(Equal([]string{"attachment net/c1/eth0 of pod default/pod1 1.2.200.4"}))
	g.Expect(attIP(g, i, att("c1", "eth0"))).To(BeEmpty())
	stats, err = i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools[1]).To(Equal(ipam.PoolStats{CIDR: "1.2.200.0/29", Family: ipam.IPv4, Total: 4, Excluded: 4}),
		"the released address is out of the pool, not cooling down")

	// Removing the pool removes its stored addresses: added again whole,
	// it has all of them.
	_, err = i.RemovePool(eni, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(i.AddPool(eni)).To(Succeed())
	in, err = i.PoolAddresses(eni)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in).To(Equal(addrs("1.2.200.2", "1.2.200.3", "1.2.200.4", "1.2.200.5")))
	kvs, _, err := db.List(t.Context(), ipam.UnlistedPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(BeEmpty())
}

// An address excluded by the configuration stays excluded when it is
// deleted from its pool and added back; a cooling address is deleted at
// once and comes back free.
func TestDeletingAndAddingBackKeepsExclusionsAndDropsCooldowns(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	yaml := defaultTestConfig + "  excludeIPs:\n    - cidr: 1.2.200.3\n      owner: appliance\n"
	i := mustFixture(t, fixtureOpts{yaml: yaml, clock: clk}, nil).ipam
	pool := netip.MustParsePrefix("1.2.200.0/29")
	g.Expect(i.AddPool(pool)).To(Succeed())
	fillNodeSubnet(g, i)

	excluded := netip.MustParseAddr("1.2.200.3")
	_, err := i.DelPoolAddress(pool, excluded, false)
	g.Expect(err).NotTo(HaveOccurred(), "an excluded address is in its pool")
	g.Expect(i.AddPoolAddress(pool, excluded)).To(Succeed())
	free, err := i.FreeableIPs(pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal(addrs("1.2.200.2", "1.2.200.4", "1.2.200.5")), "still excluded")

	ev, err := addPod(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ips(ev)[0]).To(Equal("1.2.200.2/29 gw 1.2.200.1"))
	_, err = deletePod(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	stats, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools[1].Cooldown).To(Equal(uint64(1)))

	cooling := netip.MustParseAddr("1.2.200.2")
	_, err = i.DelPoolAddress(pool, cooling, false)
	g.Expect(err).NotTo(HaveOccurred(), "a cooling address is not assigned")
	stats, err = i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools[1]).To(Equal(ipam.PoolStats{CIDR: "1.2.200.0/29", Family: ipam.IPv4, Total: 4, Excluded: 2, Free: 2}))
	g.Expect(i.AddPoolAddress(pool, cooling)).To(Succeed())
	free, err = i.FreeableIPs(pool)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(ContainElement(cooling), "added back free, its cooldown gone with it")
}

// RemoveUnusedPool removes the last added pool with nothing assigned and
// nothing cooling down, and only when its family keeps the targets.
func TestRemoveUnusedPool(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{conf: func(c *ipam.Config) { c.AddressCooldown = 0 }}, nil).ipam
	a, b := netip.MustParsePrefix("1.2.200.0/29"), netip.MustParsePrefix("1.2.201.0/29")
	g.Expect(i.AddPool(a)).To(Succeed())
	g.Expect(i.AddPool(b)).To(Succeed())
	fillNodeSubnet(g, i)
	mustAdd(g, i, pod1, att("c1", "eth0")) // in a

	// Without b: 3 free (in a), 8 in all (4 in the node's subnet, 4 in a).
	removed, err := i.RemoveUnusedPool(4, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed.IsValid()).To(BeFalse(), "the warm target keeps b")
	removed, err = i.RemoveUnusedPool(0, 9)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed.IsValid()).To(BeFalse(), "the minimum target keeps b")
	removed, err = i.RemoveUnusedPool(3, 8)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(Equal(b))
	removed, err = i.RemoveUnusedPool(0, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed.IsValid()).To(BeFalse(), "a is in use, the node's own subnet stays")
	stats, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools).To(HaveLen(2))

	// A pool added empty is unused.
	g.Expect(i.AddEmptyPool(b)).To(Succeed())
	removed, err = i.RemoveUnusedPool(0, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(Equal(b))
}

// SaveCheckpoint keeps the node's allocations in a JSON file that
// RestoreCheckpoint imports on another node.
func TestSaveAndRestoreACheckpointFile(t *testing.T) {
	g := NewWithT(t)
	src := mustFixture(t, fixtureOpts{}, nil).ipam
	mustAdd(g, src, pod1, att("c1", "eth0"))
	mustAdd(g, src, pod2, att("c2", "eth0"))
	file := checkpoint.NewJSONFile(filepath.Join(t.TempDir(), "ipam.json"))
	_, err := src.RestoreCheckpoint(file, false)
	g.Expect(err).To(MatchError(checkpoint.ErrNoCheckpoint))
	g.Expect(src.SaveCheckpoint(file)).To(Succeed())
	st, err := os.Stat(file.Path())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))

	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	t.Cleanup(func() { _ = db.Close() })
	dst := mustFixture(t, fixtureOpts{db: db}, nil).ipam
	res, err := dst.RestoreCheckpoint(file, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Imported).To(Equal(2))
	g.Expect(attIP(g, dst, att("c1", "eth0"))).To(Equal("1.2.128.10/29"))
	g.Expect(attIP(g, dst, att("c2", "eth0"))).To(Equal("1.2.128.11/29"))
	_, err = dst.RestoreCheckpoint(file, false)
	g.Expect(errors.Is(err, ipam.ErrNotEmpty)).To(BeTrue(), "%v", err)

	var m checkpoint.Memory
	g.Expect(dst.SaveCheckpoint(&m)).To(Succeed())
	var d checkpoint.Data
	g.Expect(m.Restore(&d)).To(Succeed())
	g.Expect(d.Allocations).To(HaveLen(2))
	g.Expect(time.Since(d.TakenAt)).To(BeNumerically("<", time.Minute))
}

// Without a store, a resync keeps the pools as they are (memory is the
// store), addresses out of their pool included.
func TestAResyncInMemoryKeepsThePoolsAddresses(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	i := f.ipam
	eni := netip.MustParsePrefix("1.2.200.0/29")
	g.Expect(i.AddEmptyPool(eni)).To(Succeed())
	g.Expect(i.AddPoolAddress(eni, netip.MustParseAddr("1.2.200.3"))).To(Succeed())
	g.Expect(i.AddPoolAddress(eni, netip.MustParseAddr("1.2.200.5"))).To(Succeed())
	fillNodeSubnet(g, i)
	ev, err := addPod(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ips(ev)[0]).To(Equal("1.2.200.3/29 gw 1.2.200.1"))
	for n := range 2 {
		ks := api.KubeStateData{}
		g.Expect(i.Resync(&api.DBResync{KubeState: ks}, ks, 2+n, nil)).To(Succeed())
		in, err := i.PoolAddresses(eni)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(in).To(Equal(addrs("1.2.200.3", "1.2.200.5")), "after resync %d", n+1)
		g.Expect(attIP(g, i, att("c1", "eth0"))).To(Equal("1.2.200.3/29"))
	}
	ev, err = addPod(i, pod2, att("c2", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ips(ev)[0]).To(Equal("1.2.200.5/29 gw 1.2.200.1"), "the one address left in the pool")
	_, err = addPod(i, podmodel.ID{Name: "pod3", Namespace: "default"}, att("c3", "eth0"))
	g.Expect(err).To(MatchError(ContainSubstring("no IP address is free")))
}
