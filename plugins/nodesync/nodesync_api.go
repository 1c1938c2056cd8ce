package nodesync

import (
	"fmt"
	"net"
	"strings"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// API gives the cluster-unique ID of this node and what is known of every
// node. Safe for concurrent use.
type API interface {
	// GetNodeID returns this node's ID (>= 1); 0 before the first resync
	// claimed or found it, and 0 again for good once another node or
	// another live agent was found holding it (the agent is then fatal).
	GetNodeID() uint32
	// GetAllNodes returns every known node with an ID, by name. The map
	// and the nodes in it are copies.
	GetAllNodes() Nodes
	// PublishNodeIPs stores this node's VPP addresses of one IP version in
	// its vppnode record (addresses of the other version are kept). It
	// writes only when the set of addresses changed, and only over a
	// record that names this node (compare-and-swap on its revision): a
	// record of another node is a conflict, returned as an api.FatalError.
	PublishNodeIPs(addresses []*IPWithNetwork, version IPVersion) error
}

// IPVersion is 4 or 6.
type IPVersion int

// IP versions.
const (
	IPv4 IPVersion = 4
	IPv6 IPVersion = 6
)

// IPWithNetwork is an address with the network it belongs to
// (192.168.16.5 in 192.168.16.0/24).
type IPWithNetwork struct {
	Address net.IP
	Network *net.IPNet
}

// String returns "address/prefix-length".
func (a *IPWithNetwork) String() string {
	if a == nil || a.Address == nil {
		return "<nil>"
	}
	if a.Network == nil {
		return a.Address.String()
	}
	ones, _ := a.Network.Mask.Size()
	return fmt.Sprintf("%s/%d", a.Address, ones)
}

// Node is what nodesync knows of one node.
type Node struct {
	// ID is the node's cluster-unique ID; 0 while it has none.
	ID uint32
	// Name is the node name (the agent label, the Kubernetes node name).
	Name string
	// VppIPAddresses are published by the node's agent (vppnode record).
	VppIPAddresses []*IPWithNetwork
	// MgmtIPAddresses are the InternalIP and ExternalIP addresses of the
	// Kubernetes node.
	MgmtIPAddresses []net.IP
	// PodCIDR is the Kubernetes node's pod CIDR (spec.podCIDR; the first
	// of pod_CIDRs when a record has no pod_CIDR), nil if unset or
	// unparsable.
	PodCIDR *net.IPNet
	// PodCIDRs are the Kubernetes node's pod CIDRs of every address
	// family (spec.podCIDRs): every one of pod_CIDRs that parses, in
	// order; [PodCIDR] when pod_CIDRs is empty and PodCIDR is set; nil
	// when there is none. Kubernetes keeps the first equal to PodCIDR.
	PodCIDRs []*net.IPNet
}

// Nodes are nodes by name.
type Nodes map[string]*Node

// NodeUpdateName is the name of NodeUpdate events.
const NodeUpdateName = "Node Update"

// NodeUpdate tells that a node joined (PrevState nil), left (NewState nil)
// or changed its addresses or pod CIDRs (PodCIDR or any of PodCIDRs).
type NodeUpdate struct {
	NodeName  string
	PrevState *Node
	NewState  *Node
}

var _ api.UpdateEvent = (*NodeUpdate)(nil)

// GetName returns "Node Update".
func (ev *NodeUpdate) GetName() string { return NodeUpdateName }

// String describes the change.
func (ev *NodeUpdate) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", NodeUpdateName, ev.NodeName)
	fmt.Fprintf(&b, "\n* prev: %s\n* new: %s", ev.PrevState, ev.NewState)
	return b.String()
}

// Method is Update.
func (ev *NodeUpdate) Method() api.EventMethodType { return api.Update }

// TransactionType is BestEffort.
func (ev *NodeUpdate) TransactionType() api.UpdateTransactionType { return api.BestEffort }

// Direction is Forward.
func (ev *NodeUpdate) Direction() api.UpdateDirectionType { return api.Forward }

// IsBlocking is false.
func (ev *NodeUpdate) IsBlocking() bool { return false }

// Done does nothing.
func (ev *NodeUpdate) Done(error) {}

// NodeIDCheckName is the name of NodeIDCheck events.
const NodeIDCheckName = "Node ID Check"

// NodeIDCheck asks nodesync, inside the event loop, to check again that
// this node still holds its node name (presence) and its node ID record in
// etcd. nodesync pushes it itself (its presence lease was lost, or
// PublishNodeIPs found the ID held by another node); only nodesync handles
// it. A conflict makes its Update return an api.FatalError.
type NodeIDCheck struct {
	// Reason tells why the check was asked for.
	Reason string
}

var _ api.UpdateEvent = (*NodeIDCheck)(nil)

// GetName returns "Node ID Check".
func (ev *NodeIDCheck) GetName() string { return NodeIDCheckName }

// String tells the reason.
func (ev *NodeIDCheck) String() string { return NodeIDCheckName + " (" + ev.Reason + ")" }

// Method is Update.
func (ev *NodeIDCheck) Method() api.EventMethodType { return api.Update }

// TransactionType is BestEffort: an error other than a conflict schedules
// a healing resync, which checks again.
func (ev *NodeIDCheck) TransactionType() api.UpdateTransactionType { return api.BestEffort }

// Direction is Forward.
func (ev *NodeIDCheck) Direction() api.UpdateDirectionType { return api.Forward }

// IsBlocking is false.
func (ev *NodeIDCheck) IsBlocking() bool { return false }

// Done does nothing.
func (ev *NodeIDCheck) Done(error) {}

// String describes a node; "<nil>" for nil.
func (n *Node) String() string {
	if n == nil {
		return "<nil>"
	}
	vpp := make([]string, len(n.VppIPAddresses))
	for i, a := range n.VppIPAddresses {
		vpp[i] = a.String()
	}
	mgmt := make([]string, len(n.MgmtIPAddresses))
	for i, a := range n.MgmtIPAddresses {
		mgmt[i] = a.String()
	}
	return fmt.Sprintf("{ID: %d, Name: %s, VppIPs: [%s], MgmtIPs: [%s], PodCIDR: %s, PodCIDRs: %s}",
		n.ID, n.Name, strings.Join(vpp, " "), strings.Join(mgmt, " "), describeNet(n.PodCIDR), describeNets(n.PodCIDRs))
}
