package keeper

import "net/netip"

// PoolStats counts the addresses of one pod subnet (the AWS datastore's
// GetStats, per pool): Total can be handed out at all (the subnet minus
// its network address, gateway, NAT loopback and broadcast); each of them
// is Assigned, in its Cooldown, Excluded or Free.
type PoolStats struct {
	CIDR     string `json:"cidr"`
	Family   Family `json:"family"`
	Total    uint64 `json:"total"`
	Assigned uint64 `json:"assigned"`
	Cooldown uint64 `json:"cooldown"`
	Excluded uint64 `json:"excluded"`
	Free     uint64 `json:"free"`
	// Revoked: the node's grant no longer lists this added pool (see
	// block.revoked): nothing new is handed out from it.
	Revoked bool `json:"revoked,omitempty"`
}

// NodeStats are the stats of every pool of the node, and their sums.
type NodeStats struct {
	Pools    []PoolStats `json:"pools"`
	Total    uint64      `json:"total"`
	Assigned uint64      `json:"assigned"`
	Cooldown uint64      `json:"cooldown"`
	Excluded uint64      `json:"excluded"`
	Free     uint64      `json:"free"`
	// Reservations are the allocations awaiting their confirmation.
	Reservations int `json:"reservations"`
	// CooldownReused counts the addresses handed out before their
	// cooldown ended since the last resync (no other was free).
	CooldownReused uint64 `json:"cooldownReused"`
}

// poolStats are the stats of slot i's first block (the subnet cut from
// the node ID; the node's pod subnet with an external IPAM).
func (t *table) poolStats(i int) PoolStats {
	if t.externalMode() {
		f := t.st.Families()[i]
		return PoolStats{CIDR: f.PodThis.String(), Family: familyOf(f.PodThis), Assigned: uint64(t.count(i))}
	}
	return t.blockStats(t.blocks[i][0])
}

// blockStats are the stats of one block.
func (t *table) blockStats(b *block) PoolStats {
	s := PoolStats{CIDR: b.prefix.String(), Family: familyOf(b.prefix), Total: b.pool.Pool().Size(), Free: b.pool.Pool().Free(),
		Revoked: b.revoked}
	for a := range t.cool.until {
		if b.prefix.Contains(a) {
			s.Cooldown++
		}
	}
	for a := range t.excl.owners {
		if k, held := b.pool.Owner(a); held && k.excluded() && b.prefix.Contains(a) {
			s.Excluded++
		}
	}
	s.Assigned = uint64(b.pool.Len()) - s.Cooldown - s.Excluded
	return s
}

// familyOf is the family of p.
func familyOf(p netip.Prefix) Family {
	if p.Addr().Is6() {
		return IPv6
	}
	return IPv4
}

// stats are the stats of every block of the node.
func (t *table) stats() []PoolStats {
	if t.externalMode() {
		var out []PoolStats
		for i := range t.slots() {
			out = append(out, t.poolStats(i))
		}
		return out
	}
	var out []PoolStats
	for _, bs := range t.blocks {
		for _, b := range bs {
			out = append(out, t.blockStats(b))
		}
	}
	return out
}

// Stats are the stats of every pool of this node (the pools of both
// families of a dual-stack node), read after the writes in flight.
func (k *Keeper) Stats() (NodeStats, error) {
	var ns NodeStats
	err := k.exec(func(t *table, _ *batch) error {
		for _, s := range t.stats() {
			ns.Pools = append(ns.Pools, s)
			ns.Total += s.Total
			ns.Assigned += s.Assigned
			ns.Cooldown += s.Cooldown
			ns.Excluded += s.Excluded
			ns.Free += s.Free
		}
		ns.Reservations = len(t.resv)
		ns.CooldownReused = t.cool.reused
		return nil
	})
	return ns, err
}
