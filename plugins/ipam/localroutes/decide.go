package localroutes

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
)

// candidate is a route as the decision sees it: its destination, the
// names of the interfaces it goes through (one per next hop; none for a
// blackhole, unreachable or prohibit route), its table and its type.
type candidate struct {
	dst   netip.Prefix
	links []string
	table int
	typ   string
}

// Link-local unicast ranges: a route into them never collides with a pod
// address, whatever the pool.
var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6 = netip.MustParsePrefix("fe80::/10")
)

// decide is the pure part of Overlaps: it keeps the candidates that must
// be excluded from pool (masked, valid) and returns their destinations
// clipped to pool, sorted by address then length (then table, type and
// link), one per prefix (the first in that order).
func decide(pool netip.Prefix, routes []candidate, skipLinks []string) []Route {
	var out []Route
	for _, c := range routes {
		if !c.dst.IsValid() || c.dst.Addr().BitLen() != pool.Addr().BitLen() {
			continue // other family
		}
		dst := c.dst.Masked()
		if !dst.Overlaps(pool) {
			continue
		}
		if dst.Bits() <= pool.Bits() {
			continue // contains the whole pool: the pool's own route, a default route
		}
		if isLinkLocal(dst) || allSkipped(c.links, skipLinks) {
			continue
		}
		// Two overlapping prefixes are nested; dst does not contain pool,
		// so pool contains dst and the intersection is dst itself.
		out = append(out, Route{Prefix: dst, Link: strings.Join(c.links, ","), Table: c.table, Type: c.typ})
	}
	slices.SortFunc(out, compareRoutes)
	return slices.CompactFunc(out, func(a, b Route) bool { return a.Prefix == b.Prefix })
}

// isLinkLocal tells whether p lies inside a link-local unicast range.
func isLinkLocal(p netip.Prefix) bool {
	for _, ll := range []netip.Prefix{linkLocal4, linkLocal6} {
		if p.Bits() >= ll.Bits() && ll.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// allSkipped tells whether the route goes through interfaces and all of
// them are in skip. A route through no interface is never skipped.
func allSkipped(links, skip []string) bool {
	if len(links) == 0 {
		return false
	}
	for _, l := range links {
		if !slices.Contains(skip, l) {
			return false
		}
	}
	return true
}

func compareRoutes(a, b Route) int {
	return cmp.Or(
		a.Prefix.Addr().Compare(b.Prefix.Addr()),
		cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()),
		cmp.Compare(a.Table, b.Table),
		cmp.Compare(a.Type, b.Type),
		cmp.Compare(a.Link, b.Link),
	)
}
