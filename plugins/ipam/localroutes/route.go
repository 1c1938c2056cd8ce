package localroutes

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Route is a destination to exclude from the pod pool.
type Route struct {
	// Prefix is the part of the route's destination inside the pool,
	// masked.
	Prefix netip.Prefix
	// Link names the interface the route goes through, "" if none
	// (blackhole, unreachable, prohibit); the names of all its next hops
	// joined with "," for a multipath route. For the log.
	Link string
	// Table is the routing table: 254 (main) or 255 (local).
	Table int
	// Type is the route type as ip-route(8) prints it: "unicast",
	// "local", "broadcast", "blackhole", "unreachable", "prohibit"...
	Type string
}

// String formats r for the log, in the order of ip-route(8).
func (r Route) String() string {
	s := r.Type + " " + r.Prefix.String()
	if r.Link != "" {
		s += " dev " + r.Link
	}
	return s + " table " + strconv.Itoa(r.Table)
}

// Options tunes Overlaps.
type Options struct {
	// SkipLinks names the interfaces whose routes are not exclusions:
	// the agent's own pod-facing links, whose routes lead to the pods.
	SkipLinks []string
}

// dumpAttempts bounds the retries of a dump that the kernel reports as
// interrupted (the table changed while it was read).
const dumpAttempts = 5

// Overlaps returns the destinations of the routes of the calling
// goroutine's network namespace that must be excluded from the pod pool
// pool: every route of the pool's family in the main and local tables, of
// a type that claims its destination (every type but throw), whose
// destination overlaps pool, except
//   - a route whose destination contains the whole pool (the pod subnet's
//     own route, or a default route),
//   - a route through the interfaces named in opts.SkipLinks only,
//   - a route to a link-local destination (inside 169.254.0.0/16 or
//     fe80::/10).
//
// Each result is the route's destination clipped to the pool (the
// intersection), masked, one per prefix, sorted by address then length.
// The namespace is the one of the calling OS thread when Overlaps opens
// its netlink socket (see the package doc).
func Overlaps(pool netip.Prefix, opts Options) ([]Route, error) {
	if !pool.IsValid() {
		return nil, fmt.Errorf("invalid pool %q", pool)
	}
	pool = pool.Masked()
	family, famName := netlink.FAMILY_V6, "IPv6"
	if pool.Addr().Is4() {
		family, famName = netlink.FAMILY_V4, "IPv4"
	}

	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("opening a netlink socket: %w", err)
	}
	defer h.Close()

	links, err := retryDump(h.LinkList)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}

	// Table RT_TABLE_UNSPEC with RT_FILTER_TABLE: every table, in one dump.
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s routes: %w", famName, err)
	}

	cands := make([]candidate, 0, len(routes))
	for _, r := range routes {
		if (r.Table != unix.RT_TABLE_MAIN && r.Table != unix.RT_TABLE_LOCAL) || r.Type == unix.RTN_THROW {
			continue
		}
		dst, err := toPrefix(r.Dst)
		if err != nil {
			return nil, fmt.Errorf("listing %s routes: route %s: %w", famName, r, err)
		}
		cands = append(cands, candidate{dst: dst, links: linkNames(r, names), table: r.Table, typ: typeName(r.Type)})
	}
	return decide(pool, cands, opts.SkipLinks), nil
}

// retryDump runs dump again while the kernel reports it as interrupted,
// dumpAttempts times at most.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	var err error
	for range dumpAttempts {
		var out []T
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return nil, fmt.Errorf("%d attempts: %w", dumpAttempts, err)
}

// toPrefix converts a route destination; netlink fills a default route's
// destination (0.0.0.0/0, ::/0), so nil does not occur for IPv4 and IPv6.
func toPrefix(n *net.IPNet) (netip.Prefix, error) {
	if n == nil {
		return netip.Prefix{}, errors.New("no destination")
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	ones, bits := n.Mask.Size()
	if ok && addr.Is4In6() && bits == 32 {
		addr = addr.Unmap()
	}
	if !ok || bits == 0 || addr.BitLen() != bits {
		return netip.Prefix{}, fmt.Errorf("undecodable destination %q", n)
	}
	return netip.PrefixFrom(addr, ones).Masked(), nil
}

// linkNames returns the names of the interfaces r goes through: its own,
// or those of its next hops. An interface missing from names (created
// after the link dump) is named "if<index>", as ip-route(8) does.
func linkNames(r netlink.Route, names map[int]string) []string {
	var idx []int
	if r.LinkIndex > 0 {
		idx = append(idx, r.LinkIndex)
	}
	for _, nh := range r.MultiPath {
		if nh.LinkIndex > 0 {
			idx = append(idx, nh.LinkIndex)
		}
	}
	var out []string
	for _, i := range idx {
		name, ok := names[i]
		if !ok {
			name = "if" + strconv.Itoa(i)
		}
		out = append(out, name)
	}
	return out
}

// typeName names a route type as ip-route(8) does.
func typeName(t int) string {
	switch t {
	case unix.RTN_UNICAST:
		return "unicast"
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_BROADCAST:
		return "broadcast"
	case unix.RTN_ANYCAST:
		return "anycast"
	case unix.RTN_MULTICAST:
		return "multicast"
	case unix.RTN_BLACKHOLE:
		return "blackhole"
	case unix.RTN_UNREACHABLE:
		return "unreachable"
	case unix.RTN_PROHIBIT:
		return "prohibit"
	case unix.RTN_THROW:
		return "throw"
	case unix.RTN_NAT:
		return "nat"
	case unix.RTN_XRESOLVE:
		return "xresolve"
	}
	return "type" + strconv.Itoa(t)
}
