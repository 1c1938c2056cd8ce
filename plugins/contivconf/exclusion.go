package contivconf

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// exclusions parses ipamConfig.excludeIPs; nil when there are none.
func (v *checker) exclusions(list []ExclusionJSON) []Exclusion {
	var out []Exclusion
	for i, e := range list {
		p, err := parseExclusion(e.CIDR)
		if err != nil {
			v.add("ipamConfig.excludeIPs[%d].cidr %q: %w", i, e.CIDR, err)
			continue
		}
		owner := e.Owner
		if owner == "" {
			owner = DefaultExclusionOwner
		}
		out = append(out, Exclusion{Prefix: p, Owner: owner})
	}
	return out
}

// parseExclusion parses an excludeIPs entry: a bare address (a /32 or
// /128) or a CIDR without host bits.
func parseExclusion(value string) (netip.Prefix, error) {
	if value == "" {
		return netip.Prefix{}, errors.New("missing: want an address or a CIDR (10.1.5.7, fd00:10:1:5::40/124)")
	}
	if !strings.Contains(value, "/") {
		a, err := parseIP(value)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := parsePrefix(value)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("host bits set: write the network %s, or the address alone to exclude one address", p.Masked())
	}
	return p, nil
}
