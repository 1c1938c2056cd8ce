package nodesync

// ClaimStats returns the transactions, lost transactions and listings of
// the last node ID claim.
func (p *Plugin) ClaimStats() (attempts, conflicts, listings int) {
	st := p.lastClaimStats()
	return st.Attempts, st.Conflicts, st.Listings
}

// ClaimLookup returns how the last claim found this node's record ("" if
// it created one), its single-key reads and the window of its last
// candidate.
func (p *Plugin) ClaimLookup() (foundBy string, reads, window int) {
	st := p.lastClaimStats()
	return st.FoundBy, st.Reads, st.Window
}

// Resources are the resource keywords the plugin reads.
var Resources = []string{vppNodeResource, nodeResource}

// ClaimDecodes returns the record values the last claim decoded.
func (p *Plugin) ClaimDecodes() int { return p.lastClaimStats().Decoded }

// UsePick replaces namePick as the choice among a claim's candidates.
func UsePick(f func(n int) int) Option { return func(p *Plugin) { p.pick = f } }

// Window is window.
var Window = window

// Activity is activity.
var Activity = activity

// NamePick is namePick.
var NamePick = namePick

// CappedWindow is cappedWindow.
var CappedWindow = cappedWindow
