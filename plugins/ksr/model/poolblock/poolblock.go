// Package poolblock is the etcd protocol by which an agent asks for more
// pod address blocks than the subnet its node ID gives it, and nodeipam
// (run by contiv-ksr's leader) grants them: the elastic pools of issue 16
// (the AWS datastore's ENIs, Cilium's multi-pool). Kubernetes'
// spec.podCIDRs allows one block per family, so it cannot carry them.
//
// Two keys per node, under codec.KSRPrefix, each with one writer:
//
//   - ClaimKey(node), written by the node's agent only: how many added
//     blocks it wants per family (Want), and the blocks it has stopped
//     using (Release): removed from its pools, durably, before it lists
//     them.
//   - GrantKey(node), written by nodeipam only: the blocks the node holds
//     (Blocks, in the order granted). A block is in at most one grant:
//     nodeipam writes a grant with a compare-and-swap on its revision,
//     after reading every grant at start, and frees a block only when its
//     node released it, or when the node is gone from Kubernetes and its
//     agent has been gone too (its presence key absent) for a grace
//     period: until then the grant of a deleted Node is fenced (it keeps
//     its blocks, gets no new ones, and Release still gives blocks back).
//
// Values are JSON (the watchers carry them as generic structs).
package poolblock

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// Key prefixes, relative to codec.KSRPrefix.
const (
	ClaimPrefix = "contiv/poolclaim/"
	GrantPrefix = "contiv/poolgrant/"
	// ClaimKeyword and GrantKeyword name the resources in the
	// controller's Kubernetes state.
	ClaimKeyword = "poolclaim"
	GrantKeyword = "poolgrant"
)

// ClaimKey is the key of a node's claim, relative to codec.KSRPrefix.
func ClaimKey(node string) string { return ClaimPrefix + node }

// GrantKey is the key of a node's grant, relative to codec.KSRPrefix.
func GrantKey(node string) string { return GrantPrefix + node }

// Claim is what a node's agent asks for.
type Claim struct {
	Node string `json:"node"`
	// Want is the number of added blocks the node wants to hold, per
	// family ("ipv4", "ipv6"); a family left out wants none.
	Want map[string]int `json:"want"`
	// Release lists granted blocks the agent no longer uses: the way an
	// agent reports a block empty, also while its Node is deleted (the
	// block is then freed before the agent goes).
	Release []netip.Prefix `json:"release,omitempty"`
}

// Grant is what nodeipam gives a node.
type Grant struct {
	Node   string         `json:"node"`
	Blocks []netip.Prefix `json:"blocks"`
}

// Family is "ipv4" or "ipv6", the family of p.
func Family(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "ipv4"
	}
	return "ipv6"
}

// ParseClaim decodes a claim; errors name the node key and the value.
func ParseClaim(value []byte) (Claim, error) {
	var c Claim
	if err := json.Unmarshal(value, &c); err != nil {
		return Claim{}, fmt.Errorf("pool claim %.120q: %w", value, err)
	}
	for f, n := range c.Want {
		if (f != "ipv4" && f != "ipv6") || n < 0 {
			return Claim{}, fmt.Errorf("pool claim of node %q: want %q: %d: want ipv4 or ipv6 and a count >= 0", c.Node, f, n)
		}
	}
	return c, nil
}

// ParseGrant decodes a grant.
func ParseGrant(value []byte) (Grant, error) {
	var g Grant
	if err := json.Unmarshal(value, &g); err != nil {
		return Grant{}, fmt.Errorf("pool grant %.120q: %w", value, err)
	}
	return g, nil
}
