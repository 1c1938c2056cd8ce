package ipam_test

import (
	"net/netip"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// A node with a second pool hands out its addresses once the first is
// full, with the pool's own gateway; the pool survives a restart; its
// removal is refused while in use, and with force releases its
// allocations.
func TestAnAddedPoolTakesOverWhenTheFirstIsFull(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{db: db}, nil) // 1.2.128.8/29: pods .10 to .13
	i := f.ipam
	extra := netip.MustParsePrefix("1.2.200.0/29")
	g.Expect(i.AddPool(extra)).To(Succeed())
	g.Expect(i.AddPool(netip.MustParsePrefix("1.2.128.0/28"))).To(MatchError(ContainSubstring("overlaps the pod subnet 1.2.128.8/29")))
	g.Expect(i.AddPool(netip.MustParsePrefix("fe10::/120"))).To(MatchError(ipam.ErrIPv6Disabled))

	var got []string
	for n := range 6 {
		ev, err := addPod(i, podmodel.ID{Name: "p" + string(rune('a'+n)), Namespace: "default"}, att("c"+string(rune('a'+n)), "eth0"))
		g.Expect(err).NotTo(HaveOccurred())
		got = append(got, ips(ev)[0])
	}
	g.Expect(got).To(Equal([]string{
		"1.2.128.10/29 gw 1.2.128.9", "1.2.128.11/29 gw 1.2.128.9", "1.2.128.12/29 gw 1.2.128.9", "1.2.128.13/29 gw 1.2.128.9",
		"1.2.200.2/29 gw 1.2.200.1", "1.2.200.3/29 gw 1.2.200.1",
	}))
	stats, err := i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools).To(Equal([]ipam.PoolStats{
		{CIDR: "1.2.128.8/29", Family: ipam.IPv4, Total: 4, Assigned: 4},
		{CIDR: "1.2.200.0/29", Family: ipam.IPv4, Total: 4, Assigned: 2, Free: 2},
	}))
	free, err := i.FreeableIPs(extra)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal([]netip.Addr{netip.MustParseAddr("1.2.200.4"), netip.MustParseAddr("1.2.200.5")}))
	all, err := i.AllocatedIPs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(6))
	g.Expect(all[5].Pool).To(Equal(extra))

	// A restart keeps the pool and its allocations.
	f.close(t)
	g.Expect(db.Close()).To(Succeed())
	db = openBolt(t, path)
	t.Cleanup(func() { _ = db.Close() })
	i = mustFixture(t, fixtureOpts{db: db}, nil).ipam
	stats, err = i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools).To(HaveLen(2))
	g.Expect(stats.Assigned).To(Equal(uint64(6)))

	// Removal: refused in use; with force, the two allocations go.
	_, err = i.RemovePool(extra, false)
	g.Expect(err).To(MatchError(ipam.ErrPoolInUse))
	_, err = i.RemovePool(netip.MustParsePrefix("1.2.128.8/29"), true)
	g.Expect(err).To(MatchError(ContainSubstring("cut from the node ID")))
	released, err := i.RemovePool(extra, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(released).To(HaveLen(2))
	g.Expect(released[0]).To(ContainSubstring("1.2.200.2"))
	stats, err = i.Stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats.Pools).To(Equal([]ipam.PoolStats{{CIDR: "1.2.128.8/29", Family: ipam.IPv4, Total: 4, Assigned: 4}}))
	_, err = i.RemovePool(extra, true)
	g.Expect(err).To(MatchError(ipam.ErrNoSuchPool))
}
