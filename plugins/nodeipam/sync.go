package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// SyncMode says which side of a node's ranges is the truth in its sync
// loop.
type SyncMode string

// The sync modes.
const (
	// SyncFromCloud: the Cloud is the truth; its ranges are copied to the
	// Node, never the other way, and nothing is allocated.
	SyncFromCloud SyncMode = "SyncFromCloud"
	// SyncFromCluster: the cluster is the truth; the node CIDRs (handed
	// out from the cluster ranges when a node has none) are written to
	// the Cloud, never the other way.
	SyncFromCluster SyncMode = "SyncFromCluster"
)

// Sentinel errors of the sync loops and CloudAllocator.
var (
	// ErrNoCloudRanges: the Cloud has no ranges for a node that has no
	// CIDRs, where only the Cloud may give it some (CloudAllocator,
	// SyncFromCloud). It is retried with backoff.
	ErrNoCloudRanges = errors.New("the cloud has no ranges for the node")
	// ErrInvalidMode: the node needs an operation that the sync mode does
	// not allow (ReasonInvalidMode). It is retried with backoff, and
	// needs an operator.
	ErrInvalidMode = errors.New("not allowed in this sync mode")
)

// syncer is what the node loops share.
type syncer struct {
	mode    SyncMode
	kube    *kube
	cloud   Cloud
	sets    *syncSets
	metrics *Metrics
	log     *slog.Logger
	clock   clock.Clock
	timing  Timeout // the template of every loop's Timeout
	// get reads a node (from the informer's cache).
	get func(name string) (*v1.Node, error)
	// observe, when set, is told the outcome of every run and of every
	// release (WithSyncReport).
	observe func(node string, err error)
}

// nodeSync is the sync loop of one node: one goroutine (loop) that alone
// touches the fields below the channels. It runs on every update it is
// sent and on every Timeout.Next(), and ends after a delete.
type nodeSync struct {
	s     *syncer
	name  string
	after <-chan struct{} // the previous loop of this name ends first

	updates chan *v1.Node // capacity 1: only the latest update waits
	deletes chan *v1.Node // capacity 1: the node's delete, sent once
	done    chan struct{} // closed when loop returns

	timeout Timeout
	// written are the CIDRs this loop handed out and wrote to the cloud,
	// until it sees them on the node (SyncFromCluster): a node without
	// CIDRs whose cloud ranges are these is patched, not refused.
	written []netip.Prefix
	// warned are the warnings of the last run, raised now: a warning is
	// emitted when it appears, and again only after a run without it.
	warned, raised map[string]bool
}

func newNodeSync(s *syncer, name string, after <-chan struct{}) *nodeSync {
	return &nodeSync{s: s, name: name, after: after, timeout: s.timing,
		updates: make(chan *v1.Node, 1), deletes: make(chan *v1.Node, 1), done: make(chan struct{})}
}

// update hands node (nil: read it) to the loop, replacing an update that
// waits; it never blocks.
func (n *nodeSync) update(node *v1.Node) {
	for {
		select {
		case n.updates <- node:
			return
		default:
		}
		select {
		case <-n.updates:
		default:
		}
	}
}

// remove ends the loop after it releases the node's CIDRs. Call it once.
func (n *nodeSync) remove(node *v1.Node) { n.deletes <- node }

// loop runs the node's syncs until a delete or ctx's end, waiting
// Timeout.Next() between them (from the end of the last one).
func (n *nodeSync) loop(ctx context.Context) {
	defer close(n.done)
	if n.after != nil {
		select {
		case <-n.after:
		case <-ctx.Done():
			return
		}
	}
	timer := n.s.clock.NewTimer(n.timeout.Next())
	defer func() { timer.Stop() }()
	for {
		select { // a delete goes before a waiting update
		case <-n.deletes:
			n.release(ctx)
			return
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-n.deletes:
			n.release(ctx)
			return
		case node := <-n.updates:
			n.report(n.run(ctx, node))
		case <-timer.C():
			n.report(n.run(ctx, nil))
		}
		timer.Stop()
		timer = n.s.clock.NewTimer(n.timeout.Next())
	}
}

// report feeds the outcome of a run to the Timeout.
func (n *nodeSync) report(err error) {
	if err != nil {
		n.s.log.Debug("node sync failed; retried with backoff", "node", n.name, "err", err)
	}
	n.timeout.Update(err == nil)
	if n.s.observe != nil {
		n.s.observe(n.name, err)
	}
}

// release frees the node's CIDRs; in SyncFromCluster it also removes the
// node's ranges from the cloud (one try: a failure is logged).
func (n *nodeSync) release(ctx context.Context) {
	n.s.sets.release(n.name)
	if n.s.mode == SyncFromCluster {
		if err := n.s.cloud.SetNodeRanges(ctx, n.name, nil); err != nil {
			n.s.metrics.fail("cloud")
			n.s.log.Warn("the deleted node's cloud ranges were not removed", "node", n.name, "err", err)
		}
	}
	n.s.log.Info("node deleted: its CIDRs are released", "node", n.name, "mode", n.s.mode)
	if n.s.observe != nil {
		n.s.observe(n.name, nil)
	}
}

// run compares the node's CIDRs with the cloud's ranges and acts on the
// four cases. node nil means: read it; a node that is gone is not an
// error (its delete follows).
func (n *nodeSync) run(ctx context.Context, node *v1.Node) error {
	n.raised = make(map[string]bool)
	defer func() { n.warned = n.raised }()
	if node == nil {
		var err error
		if node, err = n.s.get(n.name); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	have, err := NodeCIDRs(node)
	if err != nil {
		n.s.metrics.fail(ReasonInvalidPodCIDR)
		n.warn(node, ReasonInvalidPodCIDR, "%v; left as it is", err)
		return err
	}
	cloud, err := n.s.cloud.NodeRanges(ctx, n.name)
	if err != nil {
		n.s.metrics.fail("cloud")
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	switch {
	case len(have) == 0 && len(cloud) == 0:
		return n.allocate(ctx, node)
	case len(have) == 0:
		return n.fromCloud(ctx, node, cloud)
	case len(cloud) == 0:
		return n.toCloud(ctx, node, have)
	}
	return n.validate(node, have, cloud)
}

// allocate handles a node without CIDRs that the cloud has no ranges for.
// SyncFromCluster hands it a block of every cluster range (or the ones it
// handed it before), writes them to the cloud, then patches the node.
// SyncFromCloud waits for the cloud: ReasonCIDRNotAvailable and
// ErrNoCloudRanges, so that it is retried with backoff.
func (n *nodeSync) allocate(ctx context.Context, node *v1.Node) error {
	if n.s.mode == SyncFromCloud {
		n.warn(node, ReasonCIDRNotAvailable, "node %s: the cloud has no ranges for it yet; waiting for them", n.name)
		return fmt.Errorf("node %s: %w", n.name, ErrNoCloudRanges)
	}
	cidrs := n.written
	if cidrs == nil {
		var err error
		if cidrs, err = n.s.sets.allocate(n.name); err != nil {
			n.s.metrics.fail(ReasonCIDRNotAvailable)
			n.warn(node, ReasonCIDRNotAvailable, "%v", err)
			return err
		}
		n.written = cidrs
	}
	if err := n.s.cloud.SetNodeRanges(ctx, n.name, cidrs); err != nil {
		n.s.metrics.fail("cloud")
		return fmt.Errorf("node %s: write its ranges %v to the cloud: %w", n.name, cidrs, err)
	}
	return n.patch(ctx, cidrs)
}

// fromCloud handles a node without CIDRs that the cloud has ranges for.
// SyncFromCloud occupies them and patches the node, unless one is outside
// the cluster ranges (when there are any): then it patches nothing,
// reports them (ReasonCIDROutOfRange) and returns an error wrapping
// ErrOutsideCluster, retried with backoff (Kubernetes' sync refuses such
// a range too: its Occupy fails). SyncFromCluster patches them when they
// are the ones this loop wrote, or blocks of the cluster ranges that are
// free (or the node's already): the cloud write comes before the patch,
// so they are an allocation whose patch did not land, by this replica or
// by the leader before it. Anything else it refuses (ReasonInvalidMode).
func (n *nodeSync) fromCloud(ctx context.Context, node *v1.Node, cloud []netip.Prefix) error {
	if n.s.mode == SyncFromCluster {
		if (n.written != nil && sameRanges(cloud, n.written)) || n.s.sets.adopt(n.name, cloud) {
			n.written = cloud
			return n.patch(ctx, cloud)
		}
		n.s.metrics.fail(ReasonInvalidMode)
		n.warn(node, ReasonInvalidMode, "node %s has no pod CIDRs and the cloud has %v: mode %s does not copy from the cloud",
			n.name, cloud, n.s.mode)
		return fmt.Errorf("node %s: cloud ranges %v: %w", n.name, cloud, ErrInvalidMode)
	}
	if out := n.s.sets.outside(cloud); len(out) > 0 {
		for _, p := range out {
			n.s.metrics.fail(ReasonCIDROutOfRange)
			n.warn(node, ReasonCIDROutOfRange, "node %s: the cloud's range %s is outside the cluster ranges %v; not set on the node",
				n.name, p, n.s.sets.clusters())
		}
		return fmt.Errorf("node %s: cloud ranges %v: %w", n.name, out, ErrOutsideCluster)
	}
	n.occupy(node, cloud)
	return n.patch(ctx, cloud)
}

// toCloud handles a node with CIDRs that the cloud has no ranges for.
// SyncFromCluster occupies them and writes them to the cloud, unless one
// is outside the cluster ranges: then it writes nothing (reported by
// occupy, ReasonCIDROutOfRange) and returns an error wrapping
// ErrOutsideCluster (as Kubernetes' sync, whose Occupy fails).
// SyncFromCloud refuses (ReasonInvalidMode).
func (n *nodeSync) toCloud(ctx context.Context, node *v1.Node, have []netip.Prefix) error {
	n.written = nil
	n.occupy(node, have)
	if n.s.mode == SyncFromCloud {
		n.s.metrics.fail(ReasonInvalidMode)
		n.warn(node, ReasonInvalidMode, "node %s holds %v and the cloud has no ranges for it: mode %s does not copy to the cloud",
			n.name, have, n.s.mode)
		return fmt.Errorf("node %s: pod CIDRs %v: %w", n.name, have, ErrInvalidMode)
	}
	if out := n.s.sets.outside(have); len(out) > 0 {
		return fmt.Errorf("node %s: pod CIDRs %v not written to the cloud: %w", n.name, out, ErrOutsideCluster)
	}
	if err := n.s.cloud.SetNodeRanges(ctx, n.name, have); err != nil {
		n.s.metrics.fail("cloud")
		return fmt.Errorf("node %s: write its ranges %v to the cloud: %w", n.name, have, err)
	}
	n.s.log.Info("node pod CIDRs written to the cloud", "node", n.name, "cidrs", have)
	return nil
}

// validate handles a node with CIDRs that the cloud has ranges for: the
// same (in any order) is fine; different is reported (ReasonMismatch)
// and left as it is on both sides, in both modes.
func (n *nodeSync) validate(node *v1.Node, have, cloud []netip.Prefix) error {
	n.written = nil
	n.occupy(node, have)
	if !sameRanges(have, cloud) {
		n.s.metrics.fail(ReasonMismatch)
		n.warn(node, ReasonMismatch, "node %s: pod CIDRs %v differ from the cloud's ranges %v; both left as they are",
			n.name, have, cloud)
	}
	return nil
}

// occupy marks the node's CIDRs as taken and reports those outside the
// cluster ranges (when there are any) and those another node holds.
func (n *nodeSync) occupy(node *v1.Node, cidrs []netip.Prefix) {
	outside, conflicts := n.s.sets.occupy(n.name, cidrs)
	if n.s.sets.configured() {
		for _, p := range outside {
			n.s.metrics.fail(ReasonCIDROutOfRange)
			n.warn(node, ReasonCIDROutOfRange, "node %s: %s is outside the cluster ranges %v", n.name, p, n.s.sets.clusters())
		}
	}
	for _, c := range conflicts {
		n.s.metrics.fail(ReasonCIDRConflict)
		n.warn(node, ReasonCIDRConflict, "node %s: %s is held by node %s too", n.name, c.cidr, c.other)
	}
}

// patch sets the node's pod CIDRs.
func (n *nodeSync) patch(ctx context.Context, cidrs []netip.Prefix) error {
	if _, err := n.s.kube.patchCIDRs(ctx, n.name, cidrs); err != nil {
		n.s.metrics.fail(ReasonCIDRAssignmentFailed)
		return fmt.Errorf("node %s: set its pod CIDRs %v: %w", n.name, cidrs, err)
	}
	n.s.log.Info("node pod CIDRs set", "node", n.name, "cidrs", cidrs, "mode", n.s.mode)
	return nil
}

// warn emits a Warning event unless the last run raised the same one.
func (n *nodeSync) warn(node *v1.Node, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	key := reason + "\x00" + msg
	n.raised[key] = true
	if !n.warned[key] {
		n.s.kube.warn(node, reason, "%s", msg)
	}
}

// sameRanges tells whether a and b hold the same prefixes, in any order.
func sameRanges(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, comparePrefix)
	slices.SortFunc(b, comparePrefix)
	return slices.Equal(a, b)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
