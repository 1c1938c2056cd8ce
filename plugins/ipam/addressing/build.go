package addressing

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/contiv-ipam/agent/engine/cidr"
	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
)

// PodCIDRs are this node's pod subnets as an external IPAM gave them,
// one per slot (see addrs); an invalid one is cut from the config.
type PodCIDRs [2]netip.Prefix

// BuildState derives every subnet and address of this node, in each
// family of the config, from the config, the node ID and podThis: with
// external IPAM, the Kubernetes node's pod CIDRs (already checked by
// externalPodCIDRs); invalid, the node's slice of podSubnetCIDR. Every
// error names the value at fault.
func BuildState(cfg *contivconf.IPAMConfig, id uint32, name string, gw netip.Addr, podThis PodCIDRs) (*State, error) {
	if id == 0 {
		return nil, errors.New("this node has no node ID (nodesync did not assign one)")
	}
	st := &State{NodeID: id, NodeName: name, Cfg: cfg, Gateway: gw}
	for i, fc := range cfg.Families() {
		f, err := buildFamily(fc, familyKey(i), id, podThis[i])
		if err != nil {
			return nil, err
		}
		if i > 0 {
			if err := f.initNodeAddresses(familyKey(i), id); err != nil {
				return nil, err
			}
		}
		if i == 0 {
			st.FamilyState = *f
		} else {
			st.Second = f
		}
	}
	return st, nil
}

// familyKey is the contiv.conf path of slot i's keys, for errors.
func familyKey(i int) string {
	if i == 0 {
		return "ipamConfig."
	}
	return "ipamConfig.dualStack."
}

// buildFamily derives the addressing of one family; key prefixes the
// names of its config keys in errors.
func buildFamily(fc contivconf.FamilyConfig, key string, id uint32, podThis netip.Prefix) (*FamilyState, error) {
	f := &FamilyState{}
	var err error
	if f.PodAll, err = prefixOf(key+"podSubnetCIDR", fc.PodSubnetCIDR); err != nil {
		return nil, err
	}
	f.PodThis = podThis
	if !podThis.IsValid() {
		if f.PodThis, err = Dissect(f.PodAll, fc.PodSubnetOneNodePrefixLen, id); err != nil {
			return nil, fmt.Errorf("pod subnet of node ID %d in %spodSubnetCIDR %s: %w", id, key, f.PodAll, err)
		}
	}
	if err = f.initPodAddresses(); err != nil {
		return nil, err
	}
	if err = f.initHostInterconnect(fc, key, id); err != nil {
		return nil, err
	}
	if f.Service, err = prefixOf(key+"serviceCIDR", fc.ServiceCIDR); err != nil {
		return nil, err
	}
	if f.Vxlan, err = prefixOf(key+"vxlanCIDR", fc.VxlanCIDR); err != nil {
		return nil, err
	}
	if fc.NodeInterconnectCIDR.IsValid() {
		f.NodeIC = fc.NodeInterconnectCIDR.Masked()
	}
	return f, nil
}

// initNodeAddresses derives this node's VXLAN and node-interconnect
// addresses of a second family (the primary's are computed on demand by
// VxlanIPAddress and NodeIPAddress); a node ID they cannot hold fails the
// resync, as its pod subnet would.
func (f *FamilyState) initNodeAddresses(key string, id uint32) error {
	var err error
	if f.VxlanIP, err = NodeAddress(f.Vxlan, id, netip.Addr{}); err != nil {
		return fmt.Errorf("VXLAN address of node ID %d in %svxlanCIDR %s: %w", id, key, f.Vxlan, err)
	}
	if f.NodeIC.IsValid() {
		if f.NodeIP, err = NodeAddress(f.NodeIC, id, netip.Addr{}); err != nil {
			return fmt.Errorf("node-interconnect address of node ID %d in %snodeInterconnectCIDR %s: %w", id, key, f.NodeIC, err)
		}
	}
	return nil
}

// prefixOf checks that a configured subnet is set and masks it; key names
// it in errors.
func prefixOf(key string, p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return netip.Prefix{}, fmt.Errorf("%s: not configured", key)
	}
	return p.Masked(), nil
}

// ExternalPodCIDRs reads this node's pod CIDRs from the Kubernetes state
// (spec §2.4.6; pod_CIDRs, every family, else pod_CIDR), one per family
// of the config: found is false when the node has none (the IPAM plugin
// then waits, or keeps the pod CIDR it has); err says why a value that is there cannot be
// used. A dual-stack node that gets the CIDR of one family only cuts the
// other from the config.
func ExternalPodCIDRs(cfg *contivconf.IPAMConfig, name string, ks api.KubeStateData) (ps PodCIDRs, found bool, err error) {
	n, ok := ks[node.Keyword][node.Key(name)].(*node.Node)
	if !ok {
		return ps, false, nil
	}
	list := n.GetPod_CIDRs()
	if len(list) == 0 && n.GetPod_CIDR() != "" {
		list = []string{n.GetPod_CIDR()}
	}
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return PodCIDRs{}, true, fmt.Errorf("pod_CIDR %q of Kubernetes node %q: not a subnet", s, name)
		}
		i, err := CheckPodCIDR(cfg, p.Masked())
		if err != nil {
			return PodCIDRs{}, true, fmt.Errorf("pod_CIDR %q of Kubernetes node %q: %w", s, name, err)
		}
		if ps[i].IsValid() {
			return PodCIDRs{}, true, fmt.Errorf("pod CIDRs %q of Kubernetes node %q: two of one family", list, name)
		}
		ps[i], found = p.Masked(), true
	}
	return ps, found, nil
}

// MinPodHostBits: a pod subnet needs the network address, the gateway, at
// least one pod, the NAT loopback and the broadcast address.
const MinPodHostBits = 3

// CheckPodCIDR tells whether an external pod CIDR can be one of this
// node's pod subnets: the family of a podSubnetCIDR (its slot is
// returned), and room for pods.
func CheckPodCIDR(cfg *contivconf.IPAMConfig, p netip.Prefix) (int, error) {
	slot, found := -1, false
	var have []string
	for i, fc := range cfg.Families() {
		have = append(have, fc.PodSubnetCIDR.String())
		if all := fc.PodSubnetCIDR; !all.IsValid() || all.Addr().Is4() == p.Addr().Is4() {
			slot, found = i, true
			break
		}
	}
	if !found {
		return 0, fmt.Errorf("not of the family of podSubnetCIDR %s", strings.Join(have, " or "))
	}
	if cidr.HostBits(p) < MinPodHostBits {
		return 0, fmt.Errorf("too small: a pod subnet needs at least %d addresses (network, gateway, pods, NAT loopback, broadcast)", 1<<MinPodHostBits)
	}
	return slot, nil
}

// initPodAddresses sets the gateway (host 1) and the NAT loopback (the
// address before the last); the pods get the addresses between them. Errors are returned,
// never swallowed (spec §2.16 bug 4).
func (st *FamilyState) initPodAddresses() error {
	if cidr.HostBits(st.PodThis) < MinPodHostBits {
		return fmt.Errorf("pod subnet %s of this node is too small: it needs at least %d addresses (network, gateway, pods, NAT loopback, broadcast)", st.PodThis, 1<<MinPodHostBits)
	}
	gw, err := cidr.Addr(st.PodThis, 1)
	if err != nil {
		return fmt.Errorf("gateway of pod subnet %s: %w", st.PodThis, err)
	}
	st.PodGW, st.NatLoop = gw, cidr.Last(st.PodThis).Prev()
	return nil
}

// initHostInterconnect cuts this node's VPP-to-host subnet; VPP takes host
// 1 and Linux host 2.
func (st *FamilyState) initHostInterconnect(fc contivconf.FamilyConfig, key string, id uint32) error {
	var err error
	if st.HostAll, err = prefixOf(key+"vppHostSubnetCIDR", fc.VPPHostSubnetCIDR); err != nil {
		return err
	}
	if st.HostThis, err = Dissect(st.HostAll, fc.VPPHostSubnetOneNodePrefixLen, id); err != nil {
		return fmt.Errorf("VPP-host subnet of node ID %d: %w", id, err)
	}
	if cidr.HostBits(st.HostThis) < 2 {
		return fmt.Errorf("VPP-host subnet %s of this node has no room for two host addresses", st.HostThis)
	}
	if st.HostVPP, err = cidr.Addr(st.HostThis, 1); err != nil {
		return err
	}
	st.HostLnx, err = cidr.Addr(st.HostThis, 2)
	return err
}
