package ipam_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// A released address cools down for addressCooldown (30 s by default):
// next-fit skips it even after wrapping, it counts as used, and it is
// handed out again only once its time is up, or when no other address is
// free (a cooldown never fails an allocation).
func TestAReleasedAddressCoolsDown(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	// defaultTestConfig: node 1 has 1.2.128.8/29, pods .10 to .13.
	i := mustFixture(t, fixtureOpts{clock: clk}, nil).ipam
	next := func() string {
		a, err := i.AllocateNextFamily("ipv4", "probe")
		g.Expect(err).NotTo(HaveOccurred())
		return a.IP.String()
	}
	g.Expect([]string{next(), next()}).To(Equal([]string{"1.2.128.10", "1.2.128.11"}))
	g.Expect(i.ReleaseIP(net.ParseIP("1.2.128.10"))).To(Succeed())
	_, _, status := i.Dump()
	g.Expect(status).To(ContainSubstring("1/4 allocated, 0 excluded, 1 cooling down"))
	free, err := i.FreeAddresses()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal(uint64(3)), "a cooling address can still serve an ADD (STATUS)")
	stats, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Free).To(Equal(uint64(2)), "but it is not free")

	g.Expect([]string{next(), next()}).To(Equal([]string{"1.2.128.12", "1.2.128.13"}))
	g.Expect(next()).To(Equal("1.2.128.10"), "nothing else is free: the cooling address is handed out rather than fail")
	stats, err = i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools).To(Equal([]ipam.PoolStats{{CIDR: "1.2.128.8/29", Family: ipam.IPv4, Total: 4, Assigned: 4}}))
	g.Expect(stats.CooldownReused).To(Equal(uint64(1)))

	g.Expect(i.ReleaseIP(net.ParseIP("1.2.128.12"))).To(Succeed())
	stats, err = i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools[0]).To(Equal(ipam.PoolStats{CIDR: "1.2.128.8/29", Family: ipam.IPv4, Total: 4, Assigned: 3, Cooldown: 1}))
	g.Expect([]uint64{stats.Total, stats.Assigned, stats.Cooldown, stats.Free}).To(Equal([]uint64{4, 3, 1, 0}))
	clk.Advance(29 * time.Second)
	g.Consistently(func() string { _, _, s := i.Dump(); return s }, "50ms").Should(ContainSubstring("1 cooling down"))
	clk.Advance(time.Second)
	g.Eventually(func() string { _, _, s := i.Dump(); return s }).Should(ContainSubstring("0 cooling down"))
	free, err = i.FreeAddresses()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal(uint64(1)))
	stats, err = i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Free).To(Equal(uint64(1)))
	g.Expect(next()).To(Equal("1.2.128.12"))
}

// Several cooling addresses and a full pool: the one whose cooldown ends
// first is handed out first.
func TestTheCoolestAddressIsReusedFirst(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	i := mustFixture(t, fixtureOpts{clock: clk}, nil).ipam
	for range 4 {
		_, err := i.AllocateNextFamily("ipv4", "probe")
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(i.ReleaseIP(net.ParseIP("1.2.128.12"))).To(Succeed())
	clk.Advance(time.Second)
	g.Expect(i.ReleaseIP(net.ParseIP("1.2.128.11"))).To(Succeed())
	a, err := i.AllocateNextFamily("ipv4", "probe")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.IP.String()).To(Equal("1.2.128.12"), "released first, so it cools down first")
}

// The AWS issue vpc#2896: a pool whose free addresses are all cooling
// down must not fail an ADD while another pool has free ones, and the
// cooling addresses count as used for the warm target.
func TestCoolingAddressesNeverFailAnAddWhileAnotherPoolHasRoom(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	claims := &fakeClaimer{}
	i := mustFixture(t, fixtureOpts{clock: clk, claims: claims, conf: func(c *ipam.Config) { c.WarmTarget = 3 }}, nil).ipam
	g.Expect(i.AddPool(netip.MustParsePrefix("1.2.200.0/29"))).To(Succeed())
	for n := range 4 {
		_, err := i.AllocateNextFamily(ipam.IPv4, fmt.Sprint("o", n))
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, a := range []string{"1.2.128.10", "1.2.128.11"} {
		g.Expect(i.ReleaseIP(net.ParseIP(a))).To(Succeed())
	}
	stats, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]uint64{stats.Assigned, stats.Cooldown, stats.Free}).To(Equal([]uint64{2, 2, 4}))
	a, err := i.AllocateNextFamily(ipam.IPv4, "next")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.IP.String()).To(Equal("1.2.200.2"), "the other pool's free address, not a cooling one")
	g.Eventually(func() int { _, n := claims.last(); return n }).Should(Equal(0), "4 free with the cooling ones would be above the warm target; 3 free without them is not below it")
	_, err = i.AllocateNextFamily(ipam.IPv4, "more")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() map[string]int { c, _ := claims.last(); return c.Want }).Should(Equal(map[string]int{"ipv4": 2}),
		"2 free (cooling ones count as used): below the warm target of 3, one more block than the one held")
}

// A cooldown survives a restart: the cooling record is stored with the
// delete of the record that released the address, restored as a cooldown
// by the next agent, and deleted by the sweep once it is over.
func TestACooldownSurvivesARestart(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{db: db, clock: clk}, nil)
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.128.10"))
	g.Expect(f.ipam.ReleasePodIP(pod1)).To(Succeed())
	kv, found, err := db.Get(context.Background(), ipam.CoolingPrefix+"1.2.128.10")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "stored with the release")
	g.Expect(string(kv.Value)).To(Equal(clk.Now().Add(30 * time.Second).UTC().Format(time.RFC3339Nano)))
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	defer db.Close()
	f = mustFixture(t, fixtureOpts{db: db, clock: clk}, nil)
	stats, err := f.ipam.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Cooldown).To(Equal(uint64(1)), "restored as a cooldown")
	for _, want := range []string{"1.2.128.11", "1.2.128.12", "1.2.128.13"} {
		ip, err := f.ipam.AllocatePodIP(podmodel.ID{Name: "n" + want, Namespace: "default"}, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ip.String()).To(Equal(want), "next-fit skips the cooling address")
	}
	clk.Advance(30 * time.Second)
	g.Eventually(func() bool {
		_, found, err := db.Get(context.Background(), ipam.CoolingPrefix+"1.2.128.10")
		return err == nil && !found
	}).Should(BeTrue(), "the sweep deletes it once it is over")
	ip, err = f.ipam.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.128.10"))
}
