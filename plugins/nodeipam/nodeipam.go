package nodeipam

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// listRetry is the pause between failed lists of the Nodes in New.
const listRetry = time.Second

// New lists every Node (retrying until ctx ends: an allocator must not
// hand out anything before it knows what the nodes hold) and builds the
// allocator that p.Config.AllocatorType names.
func New(ctx context.Context, p Params, opts ...Option) (CIDRAllocator, error) {
	if err := p.Config.Validate(); err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	nodes, err := listNodes(ctx, p)
	if err != nil {
		return nil, err
	}
	switch p.Config.AllocatorType {
	case RangeAllocatorType:
		return asAllocator(NewCIDRRangeAllocator(ctx, p, nodes, opts...))
	case CloudAllocatorType:
		return asAllocator(NewCloudCIDRAllocator(ctx, p, nodes, opts...))
	case IPAMFromClusterAllocatorType:
		return asAllocator(NewIPAMController(ctx, p, SyncFromCluster, nodes, opts...))
	case IPAMFromCloudAllocatorType:
		return asAllocator(NewIPAMController(ctx, p, SyncFromCloud, nodes, opts...))
	}
	return nil, fmt.Errorf("nodeipam: allocatorType %q is not supported", p.Config.AllocatorType)
}

// listNodes returns the full list of Nodes.
func listNodes(ctx context.Context, p Params) (*v1.NodeList, error) {
	for {
		list, err := p.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			return list, nil
		}
		if p.Log != nil {
			p.Log.Warn("listing the nodes failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("nodeipam: list the nodes: %w", err)
		case <-time.After(listRetry):
		}
	}
}
