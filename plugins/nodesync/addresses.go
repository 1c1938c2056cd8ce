package nodesync

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// normalizeIP returns IPv4 addresses in their 4-byte form, so that equal
// addresses have equal bytes; nil stays nil.
func normalizeIP(ip net.IP) net.IP {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}

// ipVersion is IPv4 or IPv6.
func ipVersion(ip net.IP) IPVersion {
	if ip.To4() != nil {
		return IPv4
	}
	return IPv6
}

// parseIPWithNetwork parses "ip/prefix" (the address keeps its host bits)
// or a bare IP (a host-length network).
func parseIPWithNetwork(s string) (*IPWithNetwork, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		ip, network, err := net.ParseCIDR(s)
		if err != nil {
			return nil, err
		}
		network.IP = normalizeIP(network.IP)
		return &IPWithNetwork{Address: normalizeIP(ip), Network: network}, nil
	}
	ip := normalizeIP(net.ParseIP(s))
	if ip == nil {
		return nil, fmt.Errorf("invalid IP address %q", s)
	}
	return &IPWithNetwork{Address: ip, Network: hostNetwork(ip)}, nil
}

// hostNetwork is ip/32 or ip/128.
func hostNetwork(ip net.IP) *net.IPNet {
	bits := 8 * len(ip)
	return &net.IPNet{IP: slices.Clone(ip), Mask: net.CIDRMask(bits, bits)}
}

// containsAddress tells whether list has an entry with a's address.
func containsAddress(list []*IPWithNetwork, a *IPWithNetwork) bool {
	return slices.ContainsFunc(list, func(b *IPWithNetwork) bool { return b.Address.Equal(a.Address) })
}

// addressStrings returns the "ip/prefix" form of every address, sorted.
func addressStrings(list []*IPWithNetwork) []string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.String()
	}
	slices.Sort(out)
	return out
}

// sameVppAddresses compares two address lists as sets of "ip/prefix".
func sameVppAddresses(a, b []*IPWithNetwork) bool {
	return slices.Equal(addressStrings(a), addressStrings(b))
}

// sameIPs compares two IP lists as sets.
func sameIPs(a, b []net.IP) bool {
	key := func(list []net.IP) []string {
		out := make([]string, len(list))
		for i, ip := range list {
			out[i] = ip.String()
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(key(a), key(b))
}

// sameNet compares two networks by value (nil equals nil only).
func sameNet(a, b *net.IPNet) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.String() == b.String()
}

// sameNets compares two network lists by value, in order (nil equals
// empty).
func sameNets(a, b []*net.IPNet) bool {
	return slices.EqualFunc(a, b, sameNet)
}

// samePodCIDRs tells whether a and b have the same PodCIDR and PodCIDRs.
func samePodCIDRs(a, b *Node) bool {
	return sameNet(a.PodCIDR, b.PodCIDR) && sameNets(a.PodCIDRs, b.PodCIDRs)
}

// onlyPodCIDR tells whether n's PodCIDRs are just its PodCIDR (or both
// are none).
func onlyPodCIDR(n *Node) bool {
	if n.PodCIDR == nil {
		return len(n.PodCIDRs) == 0
	}
	return len(n.PodCIDRs) == 1 && sameNet(n.PodCIDR, n.PodCIDRs[0])
}

// copyNode returns a deep copy of n (nil for nil).
func copyNode(n *Node) *Node {
	if n == nil {
		return nil
	}
	c := &Node{ID: n.ID, Name: n.Name, VppIPAddresses: copyVppAddresses(n.VppIPAddresses), PodCIDR: copyNet(n.PodCIDR),
		PodCIDRs: copyNets(n.PodCIDRs)}
	if n.MgmtIPAddresses != nil {
		c.MgmtIPAddresses = make([]net.IP, len(n.MgmtIPAddresses))
		for i, ip := range n.MgmtIPAddresses {
			c.MgmtIPAddresses[i] = slices.Clone(ip)
		}
	}
	return c
}

// copyVppAddresses returns a deep copy of list.
func copyVppAddresses(list []*IPWithNetwork) []*IPWithNetwork {
	if list == nil {
		return nil
	}
	out := make([]*IPWithNetwork, len(list))
	for i, a := range list {
		if a != nil {
			out[i] = &IPWithNetwork{Address: slices.Clone(a.Address), Network: copyNet(a.Network)}
		}
	}
	return out
}

// copyNets returns a deep copy of list (nil for nil).
func copyNets(list []*net.IPNet) []*net.IPNet {
	if list == nil {
		return nil
	}
	out := make([]*net.IPNet, len(list))
	for i, n := range list {
		out[i] = copyNet(n)
	}
	return out
}

func copyNet(n *net.IPNet) *net.IPNet {
	if n == nil {
		return nil
	}
	return &net.IPNet{IP: slices.Clone(n.IP), Mask: slices.Clone(n.Mask)}
}

// describeVpp is "[a/p b/p]" for change descriptions.
func describeVpp(list []*IPWithNetwork) string {
	return "[" + strings.Join(addressStrings(list), " ") + "]"
}

// describeIPs is "[a b]" for change descriptions.
func describeIPs(list []net.IP) string {
	s := make([]string, len(list))
	for i, ip := range list {
		s[i] = ip.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// describeNets is "[a/p b/p]", in order.
func describeNets(list []*net.IPNet) string {
	s := make([]string, len(list))
	for i, n := range list {
		s[i] = describeNet(n)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// describeNet is the CIDR or "<nil>".
func describeNet(n *net.IPNet) string {
	if n == nil {
		return "<nil>"
	}
	return n.String()
}
