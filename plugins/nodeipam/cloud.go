package nodeipam

import (
	"context"
	"net/netip"
)

// Cloud is where the nodes' ranges live outside Kubernetes (the seed's
// cloud provider: alias IP ranges). Implementations are safe for
// concurrent use.
type Cloud interface {
	// NodeRanges returns the ranges assigned to node, in the order they
	// were set; a node with none gives an empty slice and a nil error.
	NodeRanges(ctx context.Context, node string) ([]netip.Prefix, error)
	// SetNodeRanges assigns ranges to node, replacing what it had.
	SetNodeRanges(ctx context.Context, node string, ranges []netip.Prefix) error
}
