package contivconf

import (
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/engine/cidr"
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
	if host := cidr.HostBits(contivCIDR); host < contivCIDRMinHostBits {
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
		if *b.dst, err = cidr.Subnet(contivCIDR, b.len, b.num); err != nil {
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
