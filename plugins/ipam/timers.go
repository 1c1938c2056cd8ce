package ipam

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
)

// BlacklistIP excludes ip: it is never handed out (an allocation that
// holds it keeps it until released). Run-time exclusions are kept in
// memory and applied again at every resync; errors are logged.
func (p *Plugin) BlacklistIP(ip net.IP, owner string) {
	a, ok := addressing.ToAddr(ip)
	if !ok {
		p.Log.Warn("exclusion ignored: not an IP address", "ip", ip.String(), "owner", owner)
		return
	}
	p.exclude(keeper.Exclusion{Prefix: netip.PrefixFrom(a, a.BitLen()), Owner: owner})
}

// BlacklistIPNet excludes the addresses of ipNet, as BlacklistIP.
func (p *Plugin) BlacklistIPNet(ipNet net.IPNet, owner string) {
	pfx, ok := addressing.ToPrefix(&ipNet)
	if !ok {
		p.Log.Warn("exclusion ignored: not a subnet", "cidr", ipNet.String(), "owner", owner)
		return
	}
	p.exclude(keeper.Exclusion{Prefix: pfx, Owner: owner})
}

// exclude adds run-time exclusions (kept for every later resync) and
// applies them to the table.
func (p *Plugin) exclude(es ...keeper.Exclusion) {
	p.exclMu.Lock()
	p.runtimeExcl = append(p.runtimeExcl, es...)
	p.exclMu.Unlock()
	if err := p.keeper.ApplyExclusions(es); err != nil {
		p.Log.Info("exclusions are applied at the next resync", "reason", err)
	}
}

// exclusionsFor are the exclusions a resync applies: ipamConfig.excludeIPs,
// the host's local routes inside the pod subnets (reserveLocalRoutes) and
// the run-time ones.
func (p *Plugin) exclusionsFor(st *addressing.State) []keeper.Exclusion {
	var out []keeper.Exclusion
	for _, e := range st.Cfg.Exclusions {
		out = append(out, keeper.Exclusion{Prefix: e.Prefix, Owner: e.Owner})
	}
	if st.Cfg.ReserveLocalRoutes {
		out = append(out, p.localRouteExclusions(st)...)
	}
	p.exclMu.Lock()
	out = append(out, p.runtimeExcl...)
	p.exclMu.Unlock()
	return out
}

// StartExpirationTimer starts an expiration timer on the allocation that
// holds ip: unless StopExpirationTimer names the returned ID in time, the
// allocation (every address of it) is released after timeout. An
// allocation with a timer already is ErrTimerExists; an address nobody
// holds, ErrNotAllocated. The deadline is durable when it returns.
func (p *Plugin) StartExpirationTimer(ip net.IP, timeout time.Duration) (string, error) {
	a, ok := addressing.ToAddr(ip)
	if !ok {
		return "", fmt.Errorf("address %q: not an IP address", ip)
	}
	return p.keeper.StartTimer(a, timeout)
}

// StopExpirationTimer stops the expiration timer of the allocation that
// holds ip, if uuid is its ID (ErrReservationMismatch otherwise): the
// allocation stays until it is released. The change is durable when it
// returns.
func (p *Plugin) StopExpirationTimer(ip net.IP, uuid string) error {
	a, ok := addressing.ToAddr(ip)
	if !ok {
		return fmt.Errorf("address %q: not an IP address", ip)
	}
	return p.keeper.StopTimer(a, uuid)
}
