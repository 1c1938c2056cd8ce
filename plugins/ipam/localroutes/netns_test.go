package localroutes

import (
	"errors"
	"net"
	"net/netip"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TestOverlapsInNewNamespace builds routes in a network namespace of its
// own and reads them back with Overlaps. It needs root (CAP_SYS_ADMIN and
// CAP_NET_ADMIN) and fails, not skips, without it: the reading of the
// kernel's tables is what this package is for. It never writes to the
// namespace it started in: every change goes through a netlink handle
// bound to the new namespace, and it checks that its thread has left the
// original one before it starts.
func TestOverlapsInNewNamespace(t *testing.T) {
	g := NewWithT(t)

	// The namespace belongs to this OS thread: lock it for the whole test,
	// and unlock it only once it is back in the original namespace. If that
	// fails the thread stays locked and the runtime ends it with the
	// goroutine, so no other goroutine ever runs in the test's namespace.
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("reading the test thread's network namespace: %v", err)
	}
	defer orig.Close()
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("restoring the original network namespace: %v (the thread stays locked and dies with the test)", err)
			return
		}
		runtime.UnlockOSThread()
	}()

	ns, err := netns.New() // creates the namespace and moves this thread into it
	if err != nil {
		t.Fatalf("cannot create a network namespace (this test needs root: CAP_SYS_ADMIN): %v", err)
	}
	defer ns.Close()
	if cur, err := netns.Get(); err != nil || !cur.Equal(ns) || cur.Equal(orig) {
		t.Fatalf("the test thread is not in its new network namespace (current %v, err %v); refusing to touch routes", cur, err)
	} else {
		cur.Close()
	}

	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("opening a netlink socket in the test namespace: %v", err)
	}
	defer h.Close()

	host := addLink(t, h, "host0") // carries the routes to exclude
	pods := addLink(t, h, "pods0") // the agent's pod-facing link: skipped

	// IPv4, pool 10.1.5.0/24.
	addRoute(t, h, &netlink.Route{Dst: cidr("10.1.5.64/28"), LinkIndex: host})             // excluded
	addRoute(t, h, &netlink.Route{Dst: cidr("10.1.0.0/16"), LinkIndex: host})              // contains the pool
	addRoute(t, h, &netlink.Route{Dst: cidr("0.0.0.0/0"), LinkIndex: host})                // default
	addRoute(t, h, &netlink.Route{Dst: cidr("10.1.5.0/24"), LinkIndex: pods})              // the pool's own route
	addRoute(t, h, &netlink.Route{Dst: cidr("10.1.5.128/28"), LinkIndex: pods})            // skipped link
	addRoute(t, h, &netlink.Route{Dst: cidr("10.1.5.32/28"), Type: unix.RTN_BLACKHOLE})    // excluded, no link
	addRoute(t, h, &netlink.Route{Dst: cidr("10.1.5.16/28"), Type: unix.RTN_THROW})        // claims nothing
	addRoute(t, h, &netlink.Route{Dst: cidr("10.1.5.48/28"), LinkIndex: host, Table: 100}) // other table
	addAddr(t, h, host, "10.1.5.200/32", 0)                                                // local table

	// IPv6, pool fd00:10:1:5::/64.
	addRoute(t, h, &netlink.Route{Dst: cidr("fd00:10:1:5::40/124"), LinkIndex: host})             // excluded
	addRoute(t, h, &netlink.Route{Dst: cidr("fd00:10:1::/48"), LinkIndex: host})                  // contains the pool
	addRoute(t, h, &netlink.Route{Dst: cidr("::/0"), LinkIndex: host})                            // default
	addRoute(t, h, &netlink.Route{Dst: cidr("fd00:10:1:5::/64"), LinkIndex: pods})                // the pool's own route
	addRoute(t, h, &netlink.Route{Dst: cidr("fd00:10:1:5::100/120"), LinkIndex: pods})            // skipped link
	addRoute(t, h, &netlink.Route{Dst: cidr("fd00:10:1:5::80/121"), Type: unix.RTN_UNREACHABLE})  // excluded, on lo
	addRoute(t, h, &netlink.Route{Dst: cidr("fd00:10:1:5::20/123"), LinkIndex: host, Table: 100}) // other table
	// Without a prefix route, the address shows in the local table only.
	addAddr(t, h, host, "fd00:10:1:5::c8/128", unix.IFA_F_NODAD|unix.IFA_F_NOPREFIXROUTE)

	opts := Options{SkipLinks: []string{"pods0"}}
	for _, tc := range []struct {
		pool string
		want []Route
	}{
		{"10.1.5.0/24", []Route{
			route("10.1.5.32/28", "", unix.RT_TABLE_MAIN, "blackhole"),
			route("10.1.5.64/28", "host0", unix.RT_TABLE_MAIN, "unicast"),
			route("10.1.5.200/32", "host0", unix.RT_TABLE_LOCAL, "local"),
		}},
		{"fd00:10:1:5::/64", []Route{
			route("fd00:10:1:5::40/124", "host0", unix.RT_TABLE_MAIN, "unicast"),
			route("fd00:10:1:5::80/121", "lo", unix.RT_TABLE_MAIN, "unreachable"),
			route("fd00:10:1:5::c8/128", "host0", unix.RT_TABLE_LOCAL, "local"),
		}},
		{"10.9.0.0/16", nil},
		{"fd00:9::/64", nil},
	} {
		got, err := Overlaps(netip.MustParsePrefix(tc.pool), opts)
		g.Expect(err).NotTo(HaveOccurred(), "pool %s", tc.pool)
		g.Expect(got).To(Equal(tc.want), "pool %s", tc.pool)
	}

	// Without SkipLinks the pod-facing link's route inside the pool counts.
	got, err := Overlaps(netip.MustParsePrefix("10.1.5.0/24"), Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(ContainElement(route("10.1.5.128/28", "pods0", unix.RT_TABLE_MAIN, "unicast")))
}

func TestOverlapsInvalidPool(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	_, err := Overlaps(netip.Prefix{}, Options{})
	g.Expect(err).To(MatchError(ContainSubstring("invalid pool")))
}

func TestRouteString(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	g.Expect(route("10.1.5.64/28", "host0", 254, "unicast").String()).To(Equal("unicast 10.1.5.64/28 dev host0 table 254"))
	g.Expect(route("fd00::80/121", "", 254, "blackhole").String()).To(Equal("blackhole fd00::80/121 table 254"))
}

// addLink creates an up interface named name in h's namespace and returns
// its index: a dummy, or, on a kernel built without the dummy driver, one
// end of a veth pair whose other end (name+"p") stays in the same
// namespace. Either way no packet can leave the namespace.
func addLink(t *testing.T, h *netlink.Handle, name string) int {
	t.Helper()
	err := h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}})
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Logf("no dummy driver in this kernel (%v): %s is a veth with its peer %sp in the test namespace", err, name, name)
		err = h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"})
		if err == nil {
			setUp(t, h, name+"p")
		}
	}
	if err != nil {
		t.Fatalf("creating interface %s: %v", name, err)
	}
	return setUp(t, h, name)
}

func setUp(t *testing.T, h *netlink.Handle, name string) int {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("finding interface %s: %v", name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatalf("setting %s up: %v", name, err)
	}
	return l.Attrs().Index
}

func addRoute(t *testing.T, h *netlink.Handle, r *netlink.Route) {
	t.Helper()
	if err := h.RouteAdd(r); err != nil {
		t.Fatalf("adding route %s: %v", r, err)
	}
}

func addAddr(t *testing.T, h *netlink.Handle, link int, addr string, flags int) {
	t.Helper()
	l, err := h.LinkByIndex(link)
	if err != nil {
		t.Fatalf("finding interface %d: %v", link, err)
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: cidr(addr), Flags: flags}); err != nil {
		t.Fatalf("adding address %s to %s: %v", addr, l.Attrs().Name, err)
	}
	// The kernel adds an IPv6 address's local route from its address work
	// queue, after AddrAdd has returned: wait for it (an IPv4 one is there
	// at once).
	a := netip.MustParsePrefix(addr).Addr()
	NewWithT(t).Eventually(func() bool { return hasLocal(t, h, a) }).Should(BeTrue(), "the local route of %s", a)
}

// hasLocal tells whether h's namespace has a local route for a.
func hasLocal(t *testing.T, h *netlink.Handle, a netip.Addr) bool {
	family := netlink.FAMILY_V4
	if a.Is6() {
		family = netlink.FAMILY_V6
	}
	routes, err := h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_LOCAL}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatalf("listing the local table: %v", err)
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP.Equal(a.AsSlice()) {
			return true
		}
	}
	return false
}

// cidr parses a prefix into the form netlink takes, host bits kept.
func cidr(s string) *net.IPNet {
	p := netip.MustParsePrefix(s)
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
