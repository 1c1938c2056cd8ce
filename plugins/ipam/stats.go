package ipam

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

// poolStats are the stats of slot i.
func (t *table) poolStats(i int) PoolStats {
	f := t.st.families()[i]
	s := PoolStats{CIDR: f.podThis.String(), Family: IPv4}
	if f.podThis.Addr().Is6() {
		s.Family = IPv6
	}
	s.Assigned = uint64(t.count(i))
	if t.externalMode() {
		return s
	}
	s.Total = t.size(i)
	s.Cooldown = uint64(t.coolingCount(i))
	s.Excluded = uint64(t.excludedCount(i))
	s.Free = t.free(i)
	return s
}

// Stats are the stats of every pool of this node (the pools of both
// families of a dual-stack node), read after the writes in flight.
func (p *Plugin) Stats() (NodeStats, error) {
	var ns NodeStats
	err := p.keeper.exec(func(t *table, _ *batch) error {
		for i := range t.slots() {
			s := t.poolStats(i)
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
