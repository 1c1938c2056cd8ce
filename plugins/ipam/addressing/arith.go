package addressing

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"

	"github.com/contiv-ipam/agent/engine/cidr"
)

// Errors of the address arithmetic that callers branch on.
var (
	// ErrNodeIDRange: the node ID does not fit the subnet.
	ErrNodeIDRange = errors.New("node ID out of range")
	// ErrUndefined: the subnet the address is cut from is not configured.
	ErrUndefined = errors.New("subnet undefined")
)

// The conversions below are for the seed-001 ipam.API and the events of
// other plugins, which carry net.IP and *net.IPNet; inside, IPAM works on
// netip values and the arithmetic of package cidr.

// ToPrefix converts a *net.IPNet (IPv4 in 4- or 16-byte form) to a masked
// netip.Prefix.
func ToPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	if bits == 32 {
		if !addr.Unmap().Is4() {
			return netip.Prefix{}, false
		}
		addr = addr.Unmap()
	}
	if addr.BitLen() != bits {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr, ones).Masked(), true
}

// ToAddr converts a net.IP to a netip.Addr (IPv4 unmapped).
func ToAddr(ip net.IP) (netip.Addr, bool) {
	if v4 := ip.To4(); v4 != nil {
		return netip.AddrFrom4([4]byte(v4)), true
	}
	if len(ip) == net.IPv6len {
		return netip.AddrFrom16([16]byte(ip)), true
	}
	return netip.Addr{}, false
}

// ToIPNet converts a prefix to a new *net.IPNet (IPv4 4-byte).
func ToIPNet(p netip.Prefix) *net.IPNet {
	if !p.IsValid() {
		return nil
	}
	a := p.Masked().Addr()
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(p.Bits(), a.BitLen())}
}

// ToIP converts an address to a new net.IP (IPv4 4-byte); nil if invalid.
func ToIP(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	return net.IP(a.AsSlice())
}

// Dissect returns node id's subnet of length oneNodeLen cut from cluster
// (spec §2.4.1): the ID equal to the number of node subnets takes subnet 0;
// a bigger ID, or ID 0, is an error wrapping ErrNodeIDRange.
func Dissect(cluster netip.Prefix, oneNodeLen int, id uint32) (netip.Prefix, error) {
	l, s := cluster.Bits(), cluster.Addr().BitLen()
	if oneNodeLen <= l {
		return netip.Prefix{}, fmt.Errorf("prefix length for one node (%d) must be higher than the cluster-wide subnet prefix length (%d) of %s",
			oneNodeLen, l, cluster)
	}
	if oneNodeLen > s {
		return netip.Prefix{}, fmt.Errorf("prefix length for one node (%d) exceeds the address length (%d) of %s", oneNodeLen, s, cluster)
	}
	if id == 0 {
		return netip.Prefix{}, fmt.Errorf("node ID 0 in %s: %w", cluster, ErrNodeIDRange)
	}
	num := uint64(id)
	if n := oneNodeLen - l; n < 64 {
		switch count := uint64(1) << n; {
		case num == count:
			num = 0
		case num > count:
			return netip.Prefix{}, fmt.Errorf("node ID %d does not fit %s split into /%d subnets (%d of them): %w",
				id, cluster, oneNodeLen, count, ErrNodeIDRange)
		}
	}
	return cidr.Subnet(cluster, oneNodeLen, num)
}

// NodeHost returns the host number of node id in subnet (spec §2.4.2): the
// ID itself; an ID equal to 2^hostBits has no address (its host part would
// be the network address) and a bigger one is out of range.
func NodeHost(subnet netip.Prefix, id uint32) (uint64, error) {
	num := uint64(id)
	if id == 0 {
		return 0, fmt.Errorf("node ID 0 in %s: %w", subnet, ErrNodeIDRange)
	}
	if hb := cidr.HostBits(subnet); hb < 64 {
		switch count := uint64(1) << hb; {
		case num == count:
			return 0, fmt.Errorf("no free address for nodeID %d in %s: %w", id, subnet, ErrNodeIDRange)
		case num > count:
			return 0, fmt.Errorf("nodeID is out of the valid range %d > %d of %s: %w", id, count, subnet, ErrNodeIDRange)
		}
	}
	return num, nil
}

// NodeAddress returns node id's address in subnet, stepping over excluded
// (the static default gateway) when it lies in subnet at or below the
// address: the gateway is never handed out and the result never leaves the
// subnet (spec §2.16 bug 3 fixed).
func NodeAddress(subnet netip.Prefix, id uint32, excluded netip.Addr) (netip.Addr, error) {
	num, err := NodeHost(subnet, id)
	if err != nil {
		return netip.Addr{}, err
	}
	ip, err := cidr.Addr(subnet, num)
	if err != nil {
		return netip.Addr{}, err
	}
	if excluded.IsValid() && subnet.Contains(excluded) && excluded.Compare(ip) <= 0 {
		next := ip.Next()
		if !next.IsValid() || !subnet.Contains(next) {
			return netip.Addr{}, fmt.Errorf("node ID %d: the address after skipping gateway %s is outside %s: %w",
				id, excluded, subnet, ErrNodeIDRange)
		}
		ip = next
	}
	return ip, nil
}

// NodeIDOf returns the node ID whose subnet of length oneNodeLen in
// cluster holds ip (spec §2.4.7): the highest ID, which takes subnet 0,
// maps back to 0.
func NodeIDOf(cluster netip.Prefix, oneNodeLen int, ip netip.Addr) (uint32, error) {
	if !cluster.Contains(ip) {
		return 0, fmt.Errorf("pod IP %s not from pod subnet %s", ip, cluster)
	}
	v, err := cidr.SubnetIndex(cluster, oneNodeLen, ip)
	switch {
	case errors.Is(err, cidr.ErrOverflow), err == nil && v > math.MaxUint32:
		return 0, fmt.Errorf("pod IP %s: its /%d subnet in %s is numbered beyond any node ID: %w", ip, oneNodeLen, cluster, ErrNodeIDRange)
	case err != nil:
		return 0, fmt.Errorf("pod IP %s: %w", ip, err)
	}
	return uint32(v), nil
}
