package ipam_test

import (
	"errors"
	"net"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

// inNewNetns moves the test's thread into a network namespace of its own
// for the rest of the test (the thread stays locked; the namespace is
// left and closed at cleanup) and returns a netlink handle in it. Nothing
// the test adds there can reach the host.
func inNewNetns(t *testing.T) *netlink.Handle {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("reading the test thread's network namespace: %v", err)
	}
	ns, err := netns.New()
	if err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatalf("cannot create a network namespace (this test needs root): %v", err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("opening a netlink socket in the test namespace: %v", err)
	}
	t.Cleanup(func() {
		h.Close()
		ns.Close()
		defer orig.Close()
		if err := netns.Set(orig); err != nil {
			t.Errorf("restoring the original network namespace: %v (the thread stays locked and dies with the test)", err)
			return
		}
		runtime.UnlockOSThread()
	})
	return h
}

// addVethUp creates an up veth pair name/name+"p", both ends in h's
// namespace, and returns the index of name.
func addVethUp(t *testing.T, h *netlink.Handle, name string) int {
	t.Helper()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Fatalf("creating veth %s: %v", name, err)
	}
	var idx int
	for _, n := range []string{name + "p", name} {
		l, err := h.LinkByName(n)
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			t.Fatalf("setting %s up: %v", n, err)
		}
		idx = l.Attrs().Index
	}
	return idx
}

// The host's routes inside the pod subnets are excluded: those read at
// the resync (reserveLocalRoutes: true) and those ReserveLocalRoutes reads
// later. The routes live in a namespace the test created.
func TestLocalRoutesInsideThePodSubnetsAreNeverHandedOut(t *testing.T) {
	g := NewWithT(t)
	h := inNewNetns(t)
	host := addVethUp(t, h, "host0")
	g.Expect(h.RouteAdd(&netlink.Route{Dst: cidr("1.2.128.20/30"), LinkIndex: host})).To(Succeed())
	ip6 := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("fe10:f00d::c"), Mask: net.CIDRMask(128, 128)},
		Flags: unix.IFA_F_NODAD | unix.IFA_F_NOPREFIXROUTE}
	g.Expect(h.AddrAdd(mustLink(g, h, "host0"), ip6)).To(Succeed())
	// The kernel adds the local route of an IPv6 address from its address
	// work queue, after AddrAdd has returned: wait for it, as the agent's
	// start-up would find it.
	g.Eventually(func() bool { return hasLocalRoute(g, h, "fe10:f00d::c/128") }).Should(BeTrue())

	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig + "  reserveLocalRoutes: true\n"}, nil).ipam
	var got4, got6 []string
	for range 3 {
		v4, v6, err := i.AllocateNext("", "probe")
		g.Expect(err).NotTo(HaveOccurred())
		got4, got6 = append(got4, v4.IP.String()), append(got6, v6.IP.String())
	}
	g.Expect(got4).To(Equal([]string{"1.2.128.18", "1.2.128.19", "1.2.128.24"}), "1.2.128.20/30 is a local route")
	g.Expect(got6).To(Equal([]string{"fe10:f00d::a", "fe10:f00d::b", "fe10:f00d::d"}), "fe10:f00d::c is a local address")

	// A route added later counts once ReserveLocalRoutes reads it (from
	// this thread, in the test namespace): .25 to .29 are free before.
	g.Expect(h.RouteAdd(&netlink.Route{Dst: cidr("1.2.128.24/29"), LinkIndex: host})).To(Succeed())
	i.ReserveLocalRoutes()
	_, err := i.AllocateNextFamily(ipam.IPv4, "probe")
	g.Expect(errors.Is(err, ipalloc.ErrPoolExhausted)).To(BeTrue(), "%v", err)
	_, _, status := i.Dump()
	g.Expect(status).To(ContainSubstring("1.2.128.16/28: 3/3 allocated, 9 excluded"),
		".20-.23 and .25-.29 are excluded; .24 stays with its allocation until released")
	g.Expect(i.ReleaseIPString("probe")).To(Succeed())
	_, _, status = i.Dump()
	g.Expect(status).To(ContainSubstring("1.2.128.16/28: 0/2 allocated, 10 excluded"), "released, .24 is excluded too")
}

func mustLink(g Gomega, h *netlink.Handle, name string) netlink.Link {
	l, err := h.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	return l
}

// hasLocalRoute tells whether h's namespace has dst in its local table.
func hasLocalRoute(g Gomega, h *netlink.Handle, dst string) bool {
	routes, err := h.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_LOCAL}, netlink.RT_FILTER_TABLE)
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() == dst {
			return true
		}
	}
	return false
}
