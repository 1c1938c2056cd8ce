package nodeipam

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
)

// CIDRAllocatorType names an allocator.
type CIDRAllocatorType string

// The allocators.
const (
	// RangeAllocatorType cuts node CIDRs from the cluster ranges itself.
	RangeAllocatorType CIDRAllocatorType = "RangeAllocator"
	// CloudAllocatorType copies each node's ranges from the Cloud to the
	// Node, once, retrying with Timeout on errors.
	CloudAllocatorType CIDRAllocatorType = "CloudAllocator"
	// IPAMFromClusterAllocatorType cuts node CIDRs from the cluster ranges
	// in a per-node sync loop that writes them into the Cloud first (the
	// cloud entry is the durable record a new leader finishes from) and
	// then patches the Node.
	IPAMFromClusterAllocatorType CIDRAllocatorType = "IPAMFromCluster"
	// IPAMFromCloudAllocatorType is a per-node sync loop from the Cloud to
	// the Node (CloudAllocator that keeps checking).
	IPAMFromCloudAllocatorType CIDRAllocatorType = "IPAMFromCloud"
)

func (t CIDRAllocatorType) valid() bool {
	switch t {
	case RangeAllocatorType, CloudAllocatorType, IPAMFromClusterAllocatorType, IPAMFromCloudAllocatorType:
		return true
	}
	return false
}

// needsClusterCIDRs tells whether the allocator cuts CIDRs itself.
func (t CIDRAllocatorType) needsClusterCIDRs() bool {
	return t == RangeAllocatorType || t == IPAMFromClusterAllocatorType
}

// CIDRAllocator gives Nodes their pod CIDRs.
type CIDRAllocator interface {
	// AllocateOrOccupyCIDR gives node a CIDR of each cluster range when it
	// has none, or marks the CIDRs it has as taken.
	AllocateOrOccupyCIDR(ctx context.Context, node *v1.Node) error
	// ReleaseCIDR frees the CIDRs of a deleted node.
	ReleaseCIDR(ctx context.Context, node *v1.Node) error
	// Run handles the node informer's events until stop is closed and
	// returns when its goroutines have ended.
	Run(stop <-chan struct{})
}

// Event reasons and the node condition.
const (
	// ReasonCIDRNotAvailable: no CIDR could be handed to the node (a
	// cluster range is full, or, for the cloud allocators, the cloud has
	// no ranges for it yet); it is retried with backoff (and, for the
	// range allocator, when a CIDR frees up).
	ReasonCIDRNotAvailable = "CIDRNotAvailable"
	// ReasonCIDRAssignmentFailed: the node could not be patched.
	ReasonCIDRAssignmentFailed = "CIDRAssignmentFailed"
	// ReasonCIDROutOfRange: the node holds a CIDR outside every cluster
	// range; it is left as it is.
	ReasonCIDROutOfRange = "CIDROutOfRange"
	// ReasonCIDRConflict: the node holds a CIDR that another node holds;
	// it is left as it is, and the first holder keeps the blocks.
	ReasonCIDRConflict = "CIDRConflict"
	// ReasonInvalidPodCIDR: the node holds a value that is not a CIDR.
	ReasonInvalidPodCIDR = "CloudCIDRAllocatorInvalidPodCIDR"
	// ReasonInvalidMode: the node needs an operation that the sync mode
	// does not allow.
	ReasonInvalidMode = "CloudCIDRAllocatorInvalidMode"
	// ReasonMismatch: the node's CIDRs and the cloud's differ.
	ReasonMismatch = "CloudCIDRAllocatorMismatch"
	// ReasonCIDRAssigned: the node got its CIDRs after a failure.
	ReasonCIDRAssigned = "CIDRAssigned"

	// ConditionPodCIDRAllocated is the node condition set False (reason
	// CIDRNotAvailable) when no CIDR could be handed to the node, and
	// True once it gets one. Nodes that get one at once never carry it.
	ConditionPodCIDRAllocated v1.NodeConditionType = "PodCIDRAllocated"
)

// ErrLostLead means that a claim could not be written because this
// replica no longer leads (the fence failed).
var ErrLostLead = errors.New("nodeipam: leadership lost")
