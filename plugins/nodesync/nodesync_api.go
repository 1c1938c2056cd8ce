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
	// claimed or found it.
	GetNodeID() uint32
	// GetAllNodes returns every known node with an ID, by name. The map
	// and the nodes in it are copies.
	GetAllNodes() Nodes
	// PublishNodeIPs stores this node's VPP addresses of one IP version in
	// its vppnode record (addresses of the other version are kept). It
	// writes only when the set of addresses changed.
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
	// PodCIDR is the Kubernetes node's pod CIDR (spec.podCIDR), nil if unset.
	PodCIDR *net.IPNet
}

// Nodes are nodes by name.
type Nodes map[string]*Node

// NodeUpdateName is the name of NodeUpdate events.
const NodeUpdateName = "Node Update"

// NodeUpdate tells that a node joined (PrevState nil), left (NewState nil)
// or changed its addresses or pod CIDR.
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
	cidr := "<nil>"
	if n.PodCIDR != nil {
		cidr = n.PodCIDR.String()
	}
	return fmt.Sprintf("{ID: %d, Name: %s, VppIPs: [%s], MgmtIPs: [%s], PodCIDR: %s}",
		n.ID, n.Name, strings.Join(vpp, " "), strings.Join(mgmt, " "), cidr)
}
