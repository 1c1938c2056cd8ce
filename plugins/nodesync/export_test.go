package nodesync

// ClaimStats returns the transactions, lost transactions and listings of
// the last node ID claim.
func (p *Plugin) ClaimStats() (attempts, conflicts, listings int) {
	st := p.lastClaimStats()
	return st.Attempts, st.Conflicts, st.Listings
}

// Resources are the resource keywords the plugin reads.
var Resources = []string{vppNodeResource, nodeResource}
