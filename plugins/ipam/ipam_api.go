package ipam

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// API is what the IPAM plugin offers other plugins. Every method is safe
// for concurrent use. Results are copies the caller may keep and modify.
// Before the first resync (no node ID yet) the getters of this node's
// addresses return nil and the per-node computations fail.
type API interface {
	// NodeIPAddress computes the node-interconnect address of the node
	// with the given ID, and the network it is in (the whole
	// nodeInterconnectCIDR, not a host mask). The static default gateway
	// is never returned.
	NodeIPAddress(nodeID uint32) (net.IP, *net.IPNet, error)
	// VxlanIPAddress computes the VXLAN address of the node with the given
	// ID, and the VXLAN network.
	VxlanIPAddress(nodeID uint32) (net.IP, *net.IPNet, error)
	// HostInterconnectIPInVPP is the VPP end of the VPP-to-host link.
	HostInterconnectIPInVPP() net.IP
	// HostInterconnectIPInLinux is the host (Linux) end of the VPP-to-host
	// link.
	HostInterconnectIPInLinux() net.IP
	// HostInterconnectSubnetThisNode is this node's VPP-to-host subnet.
	HostInterconnectSubnetThisNode() *net.IPNet
	// HostInterconnectSubnetAllNodes is the VPP-to-host subnet of the
	// whole cluster.
	HostInterconnectSubnetAllNodes() *net.IPNet
	// HostInterconnectSubnetOtherNode is the VPP-to-host subnet of the node
	// with the given ID.
	HostInterconnectSubnetOtherNode(nodeID uint32) (*net.IPNet, error)
	// PodSubnetAllNodes is the pod subnet of the whole cluster.
	PodSubnetAllNodes() *net.IPNet
	// PodSubnetThisNode is this node's pod subnet (with external IPAM: the
	// Kubernetes node's pod CIDR).
	PodSubnetThisNode() *net.IPNet
	// PodSubnetOtherNode is the pod subnet of the node with the given ID.
	PodSubnetOtherNode(nodeID uint32) (*net.IPNet, error)
	// ServiceNetwork is the service subnet.
	ServiceNetwork() *net.IPNet
	// PodGatewayIP is the gateway of this node's pod subnet (its first
	// host address).
	PodGatewayIP() net.IP
	// NatLoopbackIP is the virtual loopback used to route traffic between
	// a pod and a service it backs (the address before the broadcast).
	NatLoopbackIP() net.IP
	// NodeIDFromPodIP returns the ID of the node whose pod subnet holds
	// podIP.
	NodeIDFromPodIP(podIP net.IP) (uint32, error)
	// AllocatePodIP returns an address for the pod (the pod-ID API): the
	// one it already has (see GetPodIP), else the next free one after the
	// last handed out (next-fit), held as a pod-keyed allocation. With
	// external IPAM ipamData is the CNI IPConfig JSON of the external
	// plugin's result and its address is recorded. The allocation is
	// durable (in bolt) when the call returns.
	AllocatePodIP(podID podmodel.ID, ipamType, ipamData string) (net.IP, error)
	// GetPodIP returns the pod's address with a host mask (/32, /128), nil
	// when it has none. A pod with several attachments answers the one of
	// interface eth0, else the lowest address.
	GetPodIP(podID podmodel.ID) *net.IPNet
	// GetPodFromIP returns the pod holding podIP (through any of its
	// allocations).
	GetPodFromIP(podIP net.IP) (podID podmodel.ID, found bool)
	// ReleasePodIP frees every address of the pod (pod-keyed and
	// attachment-keyed); a pod without one is not an error.
	ReleasePodIP(podID podmodel.ID) error
	// AttachmentIPs returns the addresses of a CNI attachment (one per
	// family of the node), each with its pod subnet's prefix length,
	// false when the key holds none. Before IPAM
	// has a pod subnet the error wraps podmanager.ErrTryAgain.
	AttachmentIPs(key podmanager.AttachmentKey) ([]netip.Prefix, bool, error)
	// FreeAddresses is the number of pod addresses still free
	// (math.MaxUint64 with an external IPAM, which hands them out). Before
	// IPAM has a pod subnet the error wraps podmanager.ErrTryAgain.
	FreeAddresses() (uint64, error)
}

// PodCIDRChangeName is the name of PodCIDRChange events.
const PodCIDRChangeName = "Pod CIDR Change"

// PodCIDRChange is pushed when an external IPAM moved this node's pod CIDR
// (the Kubernetes node's spec.podCIDR). It is an upstream resync: every
// handler resyncs with the cached Kubernetes state, and IPAM re-initialises
// on the new subnet.
type PodCIDRChange struct {
	// LocalPodCIDR is the first of LocalPodCIDRs.
	LocalPodCIDR *net.IPNet
	// LocalPodCIDRs are the pod CIDRs that moved (one per family).
	LocalPodCIDRs []*net.IPNet
}

var _ api.Event = (*PodCIDRChange)(nil)

// GetName returns "Pod CIDR Change".
func (ev *PodCIDRChange) GetName() string { return PodCIDRChangeName }

// String names the event and the new CIDR.
func (ev *PodCIDRChange) String() string {
	if len(ev.LocalPodCIDRs) > 1 {
		return fmt.Sprintf("%s\n* LocalPodCIDRs: %v", PodCIDRChangeName, ev.LocalPodCIDRs)
	}
	return fmt.Sprintf("%s\n* LocalPodCIDR: %v", PodCIDRChangeName, ev.LocalPodCIDR)
}

// Method is UpstreamResync.
func (ev *PodCIDRChange) Method() api.EventMethodType { return api.UpstreamResync }

// IsBlocking is false.
func (ev *PodCIDRChange) IsBlocking() bool { return false }

// Done does nothing.
func (ev *PodCIDRChange) Done(error) {}
