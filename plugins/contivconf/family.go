package contivconf

import (
	"fmt"
	"net/netip"
)

// familyKeys says how one family's keys are named and defaulted.
type familyKeys struct {
	// prefix comes before every key name in messages ("ipamConfig.").
	prefix string
	// noDefaults: the family has no defaults, so an empty required key is
	// reported as missing (the dualStack block).
	noDefaults bool
}

// familyResult is what checking one family gives.
type familyResult struct {
	// ref is the subnet whose address family every subnet of the family
	// must have (familyRef); invalid when none parsed.
	ref subnet
	// pod is the effective pod subnet (invalid when unknown).
	pod subnet
	// cfg holds the family's effective subnets when ok.
	cfg FamilyConfig
	ok  bool
}

// named is the family's pod subnet for messages, else its reference subnet.
func (r familyResult) named() subnet {
	if r.pod.prefix.IsValid() {
		return r.pod
	}
	return r.ref
}

// family checks the subnets of one address family (the primary's keys or
// the dualStack block) and derives its effective subnets: every rule on
// subnets applies within each family alike. dhcp is nodeInterconnectDHCP
// for the contivCIDR split.
func (v *checker) family(f *FamilyJSON, fk familyKeys, dhcp bool) familyResult {
	contiv := v.cidr(fk.prefix+"contivCIDR", f.ContivCIDR, true)
	derived := f.ContivCIDR != ""
	service := v.familyCIDR(fk, "serviceCIDR", f.ServiceCIDR, false)
	// With contivCIDR the pod, vpp-host and vxlan keys are not used; they
	// may be empty but must still parse when given.
	pod := v.familyCIDR(fk, "podSubnetCIDR", f.PodSubnetCIDR, derived)
	host := v.familyCIDR(fk, "vppHostSubnetCIDR", f.VPPHostSubnetCIDR, derived)
	node := v.cidr(fk.prefix+"nodeInterconnectCIDR", f.NodeInterconnectCIDR, true)
	vxlan := v.familyCIDR(fk, "vxlanCIDR", f.VxlanCIDR, derived)

	var eff subnets
	var ok bool
	if derived {
		// The configured pod, vpp-host and vxlan subnets are replaced by
		// the split (or by nothing when the split fails: no checks then).
		eff, ok = v.split(contiv, node, dhcp)
		from := contiv.String()
		pod = derivedSubnet(pod.key, eff.pod, from)
		host = derivedSubnet(host.key, eff.vppHost, from)
		vxlan = derivedSubnet(vxlan.key, eff.vxlan, from)
		if !node.prefix.IsValid() {
			node = derivedSubnet(node.key, eff.nodeInterconnect, from)
		}
	} else {
		eff = subnets{pod: pod.prefix, vppHost: host.prefix, nodeInterconnect: node.prefix, vxlan: vxlan.prefix,
			podOneNodeLen: f.PodSubnetOneNodePrefixLen, vppHostOneNodeLen: f.VPPHostSubnetOneNodePrefixLen}
		okPod := v.familyOneNodeLen(fk, "podSubnetOneNodePrefixLen", f.PodSubnetOneNodePrefixLen, pod, podRoom)
		okHost := v.familyOneNodeLen(fk, "vppHostSubnetOneNodePrefixLen", f.VPPHostSubnetOneNodePrefixLen, host, vppHostRoom)
		ok = okPod && okHost && pod.prefix.IsValid() && host.prefix.IsValid() && vxlan.prefix.IsValid()
	}

	ok = v.roomForNodeID1(node, nodeInterconnectRoom) && ok
	ok = v.roomForNodeID1(vxlan, vxlanRoom) && ok
	all := []subnet{pod, host, node, vxlan, service}
	ref := familyRef(contiv, all)
	famOK := v.sameFamily(ref, all)
	v.noOverlap(all)
	res := familyResult{ref: ref, pod: pod}
	if !ok || !famOK || !service.prefix.IsValid() {
		return res
	}
	res.cfg = FamilyConfig{
		UseIPv6:     eff.pod.Addr().Is6(),
		ContivCIDR:  contiv.prefix,
		ServiceCIDR: service.prefix,
		CustomIPAMSubnets: CustomIPAMSubnets{
			PodSubnetCIDR: eff.pod, PodSubnetOneNodePrefixLen: eff.podOneNodeLen,
			VPPHostSubnetCIDR: eff.vppHost, VPPHostSubnetOneNodePrefixLen: eff.vppHostOneNodeLen,
			NodeInterconnectCIDR: eff.nodeInterconnect, VxlanCIDR: eff.vxlan,
		},
	}
	res.ok = true
	return res
}

// missing is the message of a required key left empty in a family without
// defaults.
func missing(fk familyKeys) string {
	return fmt.Sprintf("required in %s (it has no defaults) unless %scontivCIDR gives it", dualStackKey, fk.prefix)
}

// familyCIDR is cidr for the key name of a family; an empty required key
// of a family without defaults is reported as missing.
func (v *checker) familyCIDR(fk familyKeys, name, value string, optional bool) subnet {
	key := fk.prefix + name
	if value == "" && !optional && fk.noDefaults {
		msg := missing(fk)
		if name == "serviceCIDR" {
			msg = fmt.Sprintf("required in %s (it has no defaults)", dualStackKey)
		}
		v.add("%s %q: %s", key, value, msg)
		return subnet{key: key, text: value}
	}
	return v.cidr(key, value, optional)
}

// familyOneNodeLen is oneNodeLen for the key name of a family; a zero
// (absent) length in a family without defaults is reported as missing.
func (v *checker) familyOneNodeLen(fk familyKeys, name string, n int, cluster subnet, need room) bool {
	key := fk.prefix + name
	if n == 0 && fk.noDefaults {
		v.add("%s %d: %s", key, n, missing(fk))
		return false
	}
	return v.oneNodeLen(key, n, cluster, need)
}

// otherFamily checks that the dualStack family is not the primary's
// address family (when both are known).
func (v *checker) otherFamily(primary, second familyResult) bool {
	a, b := primary.named(), second.named()
	if !a.prefix.IsValid() || !b.prefix.IsValid() || a.prefix.Addr().Is4() != b.prefix.Addr().Is4() {
		return true
	}
	v.add("%s and %s are both %s: %s must be of the other address family",
		b, a, family(a.prefix.Addr()), dualStackKey)
	return false
}

// derivedSubnet names a subnet the contivCIDR split produced (p may be
// invalid: none).
func derivedSubnet(key string, p netip.Prefix, from string) subnet {
	return subnet{key: key, text: p.String(), from: from, prefix: p}
}

// split applies the contivCIDR split; false when contivCIDR is unusable.
func (v *checker) split(contiv, node subnet, dhcp bool) (subnets, bool) {
	if !contiv.prefix.IsValid() {
		return subnets{}, false // already reported
	}
	eff, err := splitContivCIDR(contiv.prefix, node.prefix, dhcp)
	if err != nil {
		v.add("%s %q: %w", contiv.key, contiv.text, err)
		return subnets{}, false
	}
	return eff, true
}

// room is what a subnet must hold for IPAM to initialise: at least
// 2^minHostBits addresses, for the reason given in what.
type room struct {
	minHostBits int
	what        string
}

// The room IPAM needs in each subnet (plugins/ipam: buildState, newTable,
// nodeAddress).
var (
	// podRoom: a node's pod subnet holds the network, the gateway (host
	// 1), the NAT loopback (the address before the last), the broadcast
	// and at least one pod address.
	podRoom = room{3, "the network, gateway, NAT loopback and broadcast addresses and at least one pod (8 addresses)"}
	// vppHostRoom: a node's VPP-host subnet holds the network, VPP's
	// address (host 1), Linux's address (host 2) and the broadcast.
	vppHostRoom = room{2, "the network, VPP (host 1), Linux (host 2) and broadcast addresses (4 addresses)"}
	// nodeInterconnectRoom: node ID n takes host n, or host n+1 when the
	// node's gateway is at or below host n (the gateway may come later,
	// from a nodeConfig entry or the NodeConfig CRD).
	nodeInterconnectRoom = room{2, "node ID 1 (host 1, or host 2 when the gateway is at or below host 1; 4 addresses)"}
	// vxlanRoom: node ID n takes host n.
	vxlanRoom = room{1, "node ID 1 (host 1; 2 addresses)"}
)

// oneNodeLen checks a one-node prefix length against its cluster subnet
// and the room a node's subnet needs.
func (v *checker) oneNodeLen(key string, n int, cluster subnet, need room) bool {
	if !cluster.prefix.IsValid() {
		return false
	}
	bits, l := cluster.prefix.Addr().BitLen(), cluster.prefix.Bits()
	switch {
	case n > bits:
		v.add("%s %d: exceeds the %d-bit address length of %s", key, n, bits, cluster)
	case n <= l:
		v.add("%s %d: must be longer than the prefix length %d of %s", key, n, l, cluster)
	case n > bits-need.minHostBits:
		v.add("%s %d: leaves %d addresses per node, too few for %s; use at most %d",
			key, n, 1<<(bits-n), need.what, bits-need.minHostBits)
	default:
		return true
	}
	return false
}

// roomForNodeID1 checks that a subnet node addresses are cut from (none
// is fine) has the room node ID 1 needs.
func (v *checker) roomForNodeID1(s subnet, need room) bool {
	if !s.prefix.IsValid() {
		return true
	}
	hostBits := s.prefix.Addr().BitLen() - s.prefix.Bits()
	if hostBits >= need.minHostBits {
		return true
	}
	v.add("%s: has %d address(es), too few for %s; use a prefix length of at most %d",
		s, 1<<hostBits, need.what, s.prefix.Addr().BitLen()-need.minHostBits)
	return false
}

// familyRef is the subnet whose address family every other must have:
// contivCIDR if valid, else the first valid subnet (the pod subnet); its
// prefix is invalid when none is valid.
func familyRef(contiv subnet, all []subnet) subnet {
	ref := contiv
	for _, s := range all {
		if ref.prefix.IsValid() {
			break
		}
		ref = s
	}
	return ref
}

// sameFamily reports every subnet whose family differs from ref's.
func (v *checker) sameFamily(ref subnet, all []subnet) bool {
	ok := true
	for _, s := range all {
		if s.prefix.IsValid() && ref.prefix.IsValid() && s.prefix.Addr().Is4() != ref.prefix.Addr().Is4() {
			v.add("%s is %s but %s is %s: every subnet must be of the same address family",
				s, family(s.prefix.Addr()), ref, family(ref.prefix.Addr()))
			ok = false
		}
	}
	return ok
}

// noOverlap reports every pair of overlapping subnets.
func (v *checker) noOverlap(all []subnet) {
	for i, a := range all {
		for _, b := range all[i+1:] {
			if a.prefix.IsValid() && b.prefix.IsValid() && a.prefix.Overlaps(b.prefix) {
				v.add("%s overlaps %s", a, b)
			}
		}
	}
}
