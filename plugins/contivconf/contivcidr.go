package contivconf

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// contivCIDRMinHostBits is the smallest contivCIDR the split accepts: the
// node-interconnect and vxlan blocks (#256 and #257 of /(S-9)) must fit.
const contivCIDRMinHostBits = 18

// subnets are the effective subnets the node addresses are cut from. An
// invalid (zero) nodeInterconnect means "none".
type subnets struct {
	pod, vppHost, nodeInterconnect, vxlan netip.Prefix
	podOneNodeLen, vppHostOneNodeLen      int
}

// splitContivCIDR cuts contivCIDR (prefix M of an S-bit family) as spec
// §2.12 describes:
//   - pod = block #0 and vpp-host = block #1 of size /(S-16), each with a
//     one-node prefix length of S-7;
//   - of the blocks of size /(S-9), #256 is the node-interconnect candidate
//     and #257 is vxlan;
//   - the node interconnect is nodeInterconnect when that is valid, else the
//     candidate unless dhcp, else none.
//
// contivCIDR must be masked and leave at least 18 host bits.
func splitContivCIDR(contivCIDR, nodeInterconnect netip.Prefix, dhcp bool) (subnets, error) {
	s := contivCIDR.Addr().BitLen()
	if host := s - contivCIDR.Bits(); host < contivCIDRMinHostBits {
		return subnets{}, fmt.Errorf("ContivCIDR is not valid, network must provide at least %dbit space (%s has %d)",
			contivCIDRMinHostBits, contivCIDR, host)
	}
	var out subnets
	var err error
	for _, b := range []struct {
		dst *netip.Prefix
		len int
		num uint64
	}{
		{&out.pod, s - 16, 0},
		{&out.vppHost, s - 16, 1},
		{&out.nodeInterconnect, s - 9, 256},
		{&out.vxlan, s - 9, 257},
	} {
		if *b.dst, err = nthSubnet(contivCIDR, b.len, b.num); err != nil {
			return subnets{}, err
		}
	}
	out.podOneNodeLen, out.vppHostOneNodeLen = s-7, s-7
	switch {
	case nodeInterconnect.IsValid():
		out.nodeInterconnect = nodeInterconnect
	case dhcp:
		out.nodeInterconnect = netip.Prefix{}
	}
	return out, nil
}

// nthSubnet returns subnet number num of length newLen inside base (which
// must be masked): the newLen-base.Bits() bits after base's prefix are num.
func nthSubnet(base netip.Prefix, newLen int, num uint64) (netip.Prefix, error) {
	bits := base.Addr().BitLen()
	newBits := newLen - base.Bits()
	if newLen > bits || newBits < 0 {
		return netip.Prefix{}, fmt.Errorf("cannot cut a /%d out of %s", newLen, base)
	}
	if newBits < 64 && num >= 1<<newBits {
		return netip.Prefix{}, fmt.Errorf("%s has no subnet /%d numbered %d", base, newLen, num)
	}
	// num << (bits-newLen) as a 128-bit number, OR-ed into the address
	// (num fits in newBits bits, so nothing carries into the prefix).
	a := base.Addr().As16()
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	shift := uint(bits - newLen)
	if shift >= 64 {
		hi |= num << (shift - 64)
	} else {
		lo |= num << shift
		if shift > 0 {
			hi |= num >> (64 - shift)
		}
	}
	binary.BigEndian.PutUint64(a[:8], hi)
	binary.BigEndian.PutUint64(a[8:], lo)
	addr := netip.AddrFrom16(a)
	if base.Addr().Is4() {
		addr = addr.Unmap()
	}
	return netip.PrefixFrom(addr, newLen), nil
}
