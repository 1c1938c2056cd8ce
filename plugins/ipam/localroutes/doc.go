// Package localroutes finds the addresses of a pod pool that the host's
// routing already claims, so that the IPAM plugin never hands a pod an
// address that collides with a local route: Cilium's ReserveLocalRoutes,
// in our own code. It reads the kernel's tables over netlink and decides;
// it knows nothing of the allocator. Of this repository it imports
// nothing.
//
// # Which routes count
//
// Overlaps(pool, opts) reads the routes of the pool's family (IPv4 or
// IPv6) in the main table (254) and the local table (255), where the
// kernel puts the addresses assigned to the host's interfaces; other
// tables (policy routing) are not read. Every route type that claims its
// destination counts: unicast, local, broadcast, anycast, multicast,
// blackhole, unreachable, prohibit. A throw route does not: it sends the
// lookup on to the next rule. A route counts when its destination overlaps
// the pool, except
//
//   - a route whose destination contains the whole pool: the pod subnet's
//     own route, a covering route, a default route;
//   - a route through the interfaces of Options.SkipLinks only (the
//     agent's own pod-facing links, whose routes lead to the pods and
//     whose addresses the allocator reserves itself); a route through no
//     interface (blackhole...) is never skipped, and a multipath route is
//     skipped only when every next hop is on a skipped link;
//   - a route to a link-local destination (inside 169.254.0.0/16 or
//     fe80::/10).
//
// Two prefixes that overlap are nested, and a counted route does not
// contain the pool, so its intersection with the pool is its own
// destination. The result holds that destination, masked, once per prefix
// (when two routes have the same destination, the first in the order
// main table before local, then type, then link), sorted by address then
// length, with the link, table and type of the route for the log. A
// result may lie inside another (an address and the subnet route around
// it): exclude both.
//
// # Namespace
//
// Overlaps opens one netlink socket, in the network namespace of the OS
// thread it runs on at that moment, and reads links and routes through it.
// It does not switch namespaces and does not lock the thread.
//
// # Caller duties
//
//  1. Call Overlaps from the IPAM plugin when it builds a node's pod pool,
//     once per pool (IPv4 and IPv6 separately), before the first
//     allocation, with the agent's pod-facing interfaces in SkipLinks.
//  2. Never switch the network namespace of a thread without locking it
//     (runtime.LockOSThread) and restoring it before unlocking: an
//     unlocked goroutine left in another namespace would make any later
//     Overlaps, on whatever goroutine lands on that thread, read the wrong
//     tables. To read another namespace on purpose, lock the thread,
//     switch, call Overlaps, switch back, unlock.
//  3. Reserve every returned prefix in the pool (none of its addresses is
//     handed out) and log each with its Route.String. An address already
//     held by a pod that falls inside a result is the operator's conflict
//     to resolve: report it, do not release it silently.
//  4. Handle the error: it names the step that failed ("opening a netlink
//     socket", "listing links", "listing IPv6 routes") and wraps the cause.
//     A dump that the kernel reports as interrupted (the table changed
//     while it was read) is retried a few times first.
//
// # State
//
// None: no package variables that change, no goroutines, no cache. Each
// call reads the tables afresh and closes its socket; calls may run
// concurrently.
package localroutes
