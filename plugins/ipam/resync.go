package ipam

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/contivconf"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam/cidr"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// buildState derives every subnet and address of this node from the
// config, the node ID and podThis: with external IPAM, the Kubernetes
// node's pod CIDR (already checked by externalPodCIDR); invalid, the
// node's slice of podSubnetCIDR. Every error names the value at fault.
func buildState(cfg *contivconf.IPAMConfig, id uint32, name string, gw netip.Addr, podThis netip.Prefix) (*state, error) {
	if id == 0 {
		return nil, errors.New("this node has no node ID (nodesync did not assign one)")
	}
	st := &state{nodeID: id, nodeName: name, cfg: cfg, gateway: gw}
	var err error
	if st.podAll, err = prefixOf("podSubnetCIDR", cfg.PodSubnetCIDR); err != nil {
		return nil, err
	}
	st.podThis = podThis
	if !podThis.IsValid() {
		if st.podThis, err = dissect(st.podAll, cfg.PodSubnetOneNodePrefixLen, id); err != nil {
			return nil, fmt.Errorf("pod subnet of node ID %d: %w", id, err)
		}
	}
	if err = st.initPodAddresses(); err != nil {
		return nil, err
	}
	if err = st.initHostInterconnect(cfg, id); err != nil {
		return nil, err
	}
	if st.service, err = prefixOf("serviceCIDR", cfg.ServiceCIDR); err != nil {
		return nil, err
	}
	if st.vxlan, err = prefixOf("vxlanCIDR", cfg.VxlanCIDR); err != nil {
		return nil, err
	}
	if cfg.NodeInterconnectCIDR.IsValid() {
		st.nodeIC = cfg.NodeInterconnectCIDR.Masked()
	}
	return st, nil
}

// prefixOf checks that a configured subnet is set and masks it; key names
// it in errors.
func prefixOf(key string, p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return netip.Prefix{}, fmt.Errorf("ipamConfig.%s: not configured", key)
	}
	return p.Masked(), nil
}

// externalPodCIDR reads this node's pod CIDR from the Kubernetes state
// (spec §2.4.6): found is false when the node has none (the config's
// slice is used then); err says why a value that is there cannot be used.
func externalPodCIDR(cfg *contivconf.IPAMConfig, name string, ks api.KubeStateData) (p netip.Prefix, found bool, err error) {
	n, ok := ks[nodeResource][node.Key(name)].(*node.Node)
	if !ok || n.GetPod_CIDR() == "" {
		return netip.Prefix{}, false, nil
	}
	p, err = netip.ParsePrefix(n.GetPod_CIDR())
	if err != nil {
		return netip.Prefix{}, true, fmt.Errorf("pod_CIDR %q of Kubernetes node %q: not a subnet", n.GetPod_CIDR(), name)
	}
	if err := checkPodCIDR(cfg, p.Masked()); err != nil {
		return netip.Prefix{}, true, fmt.Errorf("pod_CIDR %q of Kubernetes node %q: %w", n.GetPod_CIDR(), name, err)
	}
	return p.Masked(), true, nil
}

// minPodHostBits: a pod subnet needs the network address, the gateway, at
// least one pod, the NAT loopback and the broadcast address.
const minPodHostBits = 3

// checkPodCIDR tells whether an external pod CIDR can be this node's pod
// subnet: the family of podSubnetCIDR, and room for pods.
func checkPodCIDR(cfg *contivconf.IPAMConfig, p netip.Prefix) error {
	if all := cfg.PodSubnetCIDR; all.IsValid() && all.Addr().Is4() != p.Addr().Is4() {
		return fmt.Errorf("not of the family of podSubnetCIDR %s", all)
	}
	if cidr.HostBits(p) < minPodHostBits {
		return fmt.Errorf("too small: a pod subnet needs at least %d addresses (network, gateway, pods, NAT loopback, broadcast)", 1<<minPodHostBits)
	}
	return nil
}

// initPodAddresses sets the gateway (host 1) and the NAT loopback (the
// address before the last); the pods get the addresses between them. Errors are returned,
// never swallowed (spec §2.16 bug 4).
func (st *state) initPodAddresses() error {
	if cidr.HostBits(st.podThis) < minPodHostBits {
		return fmt.Errorf("pod subnet %s of this node is too small: it needs at least %d addresses (network, gateway, pods, NAT loopback, broadcast)", st.podThis, 1<<minPodHostBits)
	}
	gw, err := cidr.Addr(st.podThis, 1)
	if err != nil {
		return fmt.Errorf("gateway of pod subnet %s: %w", st.podThis, err)
	}
	st.podGW, st.natLoop = gw, cidr.Last(st.podThis).Prev()
	return nil
}

// initHostInterconnect cuts this node's VPP-to-host subnet; VPP takes host
// 1 and Linux host 2.
func (st *state) initHostInterconnect(cfg *contivconf.IPAMConfig, id uint32) error {
	var err error
	if st.hostAll, err = prefixOf("vppHostSubnetCIDR", cfg.VPPHostSubnetCIDR); err != nil {
		return err
	}
	if st.hostThis, err = dissect(st.hostAll, cfg.VPPHostSubnetOneNodePrefixLen, id); err != nil {
		return fmt.Errorf("VPP-host subnet of node ID %d: %w", id, err)
	}
	if cidr.HostBits(st.hostThis) < 2 {
		return fmt.Errorf("VPP-host subnet %s of this node has no room for two host addresses", st.hostThis)
	}
	if st.hostVPP, err = cidr.Addr(st.hostThis, 1); err != nil {
		return err
	}
	st.hostLnx, err = cidr.Addr(st.hostThis, 2)
	return err
}

// Resource keywords of the Kubernetes state IPAM reads.
const (
	nodeResource = node.Keyword
	podResource  = podmodel.Keyword
)
