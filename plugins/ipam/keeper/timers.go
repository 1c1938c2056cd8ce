package ipam

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
)

// StartExpirationTimer starts an expiration timer on the allocation that
// holds ip: unless StopExpirationTimer names the returned ID in time, the
// allocation (every address of it) is released after timeout. An
// allocation with a timer already is ErrTimerExists; an address nobody
// holds, ErrNotAllocated. The deadline is durable when it returns.
func (p *Plugin) StartExpirationTimer(ip net.IP, timeout time.Duration) (string, error) {
	if timeout <= 0 {
		return "", fmt.Errorf("expiration timeout %s: want a positive duration", timeout)
	}
	var id string
	err := p.changeTimer(ip, func(t *table, key allocKey) (*reservation, error) {
		if rv, ok := t.resv[key]; ok {
			return nil, fmt.Errorf("%s (expires at %s): %w", key, rv.deadline.UTC().Format(time.RFC3339), ErrTimerExists)
		}
		rv := p.keeper.newReservation(timeout)
		id = rv.id
		return rv, nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// StopExpirationTimer stops the expiration timer of the allocation that
// holds ip, if uuid is its ID (ErrReservationMismatch otherwise): the
// allocation stays until it is released. The change is durable when it
// returns.
func (p *Plugin) StopExpirationTimer(ip net.IP, uuid string) error {
	return p.changeTimer(ip, func(t *table, key allocKey) (*reservation, error) {
		rv, ok := t.resv[key]
		if !ok || rv.id != uuid {
			return nil, fmt.Errorf("stopping timer %s of %s (it has %q): %w", uuid, key, rv.id, ErrReservationMismatch)
		}
		return nil, nil
	})
}

// changeTimer stores the allocation holding ip with the reservation next
// picks (nil: none), and keeps it in the table once durable.
func (p *Plugin) changeTimer(ip net.IP, next func(t *table, key allocKey) (*reservation, error)) error {
	a, ok := addressing.ToAddr(ip)
	if !ok {
		return fmt.Errorf("address %q: not an IP address", ip)
	}
	var werr error
	err := p.keeper.exec(func(t *table, b *batch) error {
		key, held := t.owner(a)
		if !held || key.excluded() {
			return fmt.Errorf("expiration timer of %s: %w", a, ErrNotAllocated)
		}
		rv, err := next(t, key)
		if err != nil {
			return err
		}
		as, _ := t.lookupAll(key)
		b.add(write{op: kvdb.PutOp(key.storeKey(), t.recordOf(key, t.podOf(key), as, rv)), done: func(o outcome, err error) {
			if o != durable {
				werr = fmt.Errorf("expiration timer of %s: not stored: %w", key, err)
				if o == unknown {
					t.unsure[key] = struct{}{}
				}
				return
			}
			if rv == nil {
				delete(t.resv, key)
				return
			}
			t.resv[key] = *rv
			p.keeper.expiryNear(rv.deadline)
		}})
		return nil
	})
	if err != nil {
		return err
	}
	return werr
}

// BlacklistIP excludes ip: it is never handed out (an allocation that
// holds it keeps it until released). Run-time exclusions are kept in
// memory and applied again at every resync; errors are logged.
func (p *Plugin) BlacklistIP(ip net.IP, owner string) {
	a, ok := addressing.ToAddr(ip)
	if !ok {
		p.Log.Warn("exclusion ignored: not an IP address", "ip", ip.String(), "owner", owner)
		return
	}
	p.exclude(exclusion{prefix: netip.PrefixFrom(a, a.BitLen()), owner: owner})
}

// BlacklistIPNet excludes the addresses of ipNet, as BlacklistIP.
func (p *Plugin) BlacklistIPNet(ipNet net.IPNet, owner string) {
	pfx, ok := addressing.ToPrefix(&ipNet)
	if !ok {
		p.Log.Warn("exclusion ignored: not a subnet", "cidr", ipNet.String(), "owner", owner)
		return
	}
	p.exclude(exclusion{prefix: pfx, owner: owner})
}

// exclude adds run-time exclusions (kept for every later resync) and
// applies them to the table.
func (p *Plugin) exclude(es ...exclusion) {
	p.exclMu.Lock()
	p.runtimeExcl = append(p.runtimeExcl, es...)
	p.exclMu.Unlock()
	err := p.keeper.exec(func(t *table, _ *batch) error {
		for _, e := range es {
			p.keeper.applyExclusion(t, e)
		}
		return nil
	})
	if err != nil {
		p.Log.Info("exclusions are applied at the next resync", "reason", err)
	}
}

// exclusionsFor are the exclusions a resync applies: ipamConfig.excludeIPs,
// the host's local routes inside the pod subnets (reserveLocalRoutes) and
// the run-time ones.
func (p *Plugin) exclusionsFor(st *addressing.State) []exclusion {
	var out []exclusion
	for _, e := range st.Cfg.Exclusions {
		out = append(out, exclusion{prefix: e.Prefix, owner: e.Owner})
	}
	if st.Cfg.ReserveLocalRoutes {
		out = append(out, p.localRouteExclusions(st)...)
	}
	p.exclMu.Lock()
	out = append(out, p.runtimeExcl...)
	p.exclMu.Unlock()
	return out
}

// applyExclusions applies the exclusions of a resync to its new table.
func (k *keeper) applyExclusions(t *table, in *resyncInput) {
	for _, e := range in.exclusions {
		k.applyExclusion(t, e)
	}
}

// applyExclusion applies one exclusion; a bad one is logged.
func (k *keeper) applyExclusion(t *table, e exclusion) {
	n, err := t.exclude(e)
	switch {
	case err != nil:
		k.log.Warn("exclusion not applied", "error", err)
	case n > 0:
		k.log.Info("addresses excluded from allocation", "cidr", e.prefix.String(), "owner", e.owner, "addresses", n)
	}
}
