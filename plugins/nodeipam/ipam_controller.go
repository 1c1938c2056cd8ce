package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/utils/clock"
)

// errStopped: the controller's Run has returned.
var errStopped = errors.New("nodeipam: the sync controller is stopped")

// Option changes how the allocators are built.
type Option func(*options)

type options struct {
	clock   clock.WithTickerAndDelayedExecution
	observe func(node string, err error)
}

// WithClock replaces the real clock of the sync loops, the retries and the
// range allocator's fences (tests: k8s.io/utils/clock/testing).
func WithClock(c clock.WithTickerAndDelayedExecution) Option { return func(o *options) { o.clock = c } }

// asAllocator returns a as a CIDRAllocator, or a nil one with err (never
// an interface holding a nil pointer).
func asAllocator[T CIDRAllocator](a T, err error) (CIDRAllocator, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}

// WithSyncReport makes the node sync loops of IPAMController call fn
// after every run with its outcome (nil: success) and with nil once a
// deleted node's CIDRs are released, in the node's loop goroutine (as
// Kubernetes' sync loop reports to its controller). fn must return
// quickly. Tests use it to know when a run is over.
func WithSyncReport(fn func(node string, err error)) Option {
	return func(o *options) { o.observe = fn }
}

func buildOptions(opts []Option) options {
	o := options{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// IPAMController keeps every Node's CIDRs and its ranges in the Cloud in
// step, with one sync loop per node (nodeSync) in one SyncMode:
// IPAMFromCluster runs SyncFromCluster (the CIDRs are cut from the
// cluster ranges and written to the cloud), IPAMFromCloud SyncFromCloud
// (the cloud's ranges are copied to the nodes). The loops run while Run
// runs; a node's updates before Run wait for it.
type IPAMController struct {
	s     *syncer
	nodes coreinformers.NodeInformer
	live  atomic.Int64 // loop goroutines running

	mu      sync.Mutex // guards what follows
	loops   map[string]*nodeSync
	ending  map[*nodeSync]bool // loops sent their delete
	ctx     context.Context    // Run's, once it runs
	stopped bool               // Run has returned
	wg      sync.WaitGroup
}

var _ CIDRAllocator = (*IPAMController)(nil)

// NewIPAMController builds the controller of mode and occupies, before
// anything is allocated, the CIDRs of nodeList (the full list of Nodes).
// p.Cloud, p.Client and p.Nodes are required; SyncFromCluster needs
// cluster ranges, SyncFromCloud uses them, when configured, to report the
// cloud's ranges outside them.
//
// In SyncFromCluster the cloud's ranges of the listed nodes without CIDRs
// are taken for them too (when they are free blocks of the ranges): they
// are allocations whose patch did not land, perhaps by the leader before,
// and nothing may be handed out over them.
func NewIPAMController(ctx context.Context, p Params, mode SyncMode, nodeList *v1.NodeList, opts ...Option) (*IPAMController, error) {
	if mode != SyncFromCloud && mode != SyncFromCluster {
		return nil, fmt.Errorf("nodeipam: sync mode %q: want %s or %s", mode, SyncFromCloud, SyncFromCluster)
	}
	s, err := newSyncer(p, mode, buildOptions(opts))
	if err != nil {
		return nil, err
	}
	if mode == SyncFromCluster && !s.sets.configured() {
		return nil, fmt.Errorf("nodeipam: clusterCIDRs: sync mode %s needs at least one", mode)
	}
	c := &IPAMController{s: s, nodes: p.Nodes, loops: make(map[string]*nodeSync), ending: make(map[*nodeSync]bool)}
	if nodeList != nil {
		for i := range nodeList.Items {
			c.occupyListed(&nodeList.Items[i])
		}
		if err := c.adoptPending(ctx, nodeList); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// adoptPending takes, in SyncFromCluster, the cloud's ranges of the
// listed nodes without CIDRs.
func (c *IPAMController) adoptPending(ctx context.Context, nodeList *v1.NodeList) error {
	if c.s.mode != SyncFromCluster {
		return nil
	}
	for i := range nodeList.Items {
		node := &nodeList.Items[i]
		if hasCIDRs(node) {
			continue
		}
		cloud, err := c.s.cloud.NodeRanges(ctx, node.Name)
		if err != nil {
			return fmt.Errorf("nodeipam: %w", err)
		}
		if len(cloud) > 0 && c.s.sets.adopt(node.Name, cloud) {
			c.s.log.Info("cloud ranges of a node without CIDRs taken for it", "node", node.Name, "cidrs", cloud)
		}
	}
	return nil
}

// newSyncer checks p and builds what the loops share.
func newSyncer(p Params, mode SyncMode, o options) (*syncer, error) {
	if err := checkCloudParams(p); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	sets, err := newSyncSets(p.Config, p.Metrics)
	if err != nil {
		return nil, err
	}
	return &syncer{mode: mode, kube: newKube(p.Client, p.Recorder, p.Log), cloud: p.Cloud, sets: sets,
		metrics: p.Metrics, log: p.Log, clock: o.clock, get: p.Nodes.Lister().Get, observe: o.observe,
		timing: Timeout{Resync: p.Config.Resync, MaxBackoff: p.Config.MaxBackoff, InitialRetry: p.Config.InitialRetry}}, nil
}

// checkCloudParams checks the params the cloud allocators require.
func checkCloudParams(p Params) error {
	switch {
	case p.Cloud == nil:
		return fmt.Errorf("nodeipam: allocatorType %s needs a Cloud: Params.Cloud is nil", p.Config.AllocatorType)
	case p.Client == nil:
		return errors.New("nodeipam: Params.Client is nil")
	case p.Nodes == nil:
		return errors.New("nodeipam: Params.Nodes is nil")
	}
	return nil
}

// occupyListed occupies the CIDRs of a listed node and reports those
// outside the cluster ranges and those another node holds.
func (c *IPAMController) occupyListed(node *v1.Node) {
	cidrs, err := NodeCIDRs(node)
	if err != nil || len(cidrs) == 0 {
		return // the node's loop reports an invalid value
	}
	outside, conflicts := c.s.sets.occupy(node.Name, cidrs)
	if c.s.sets.configured() {
		for _, p := range outside {
			c.s.metrics.fail(ReasonCIDROutOfRange)
			c.s.kube.warn(node, ReasonCIDROutOfRange, "node %s: %s is outside the cluster ranges %v", node.Name, p, c.s.sets.clusters())
		}
	}
	for _, cf := range conflicts {
		c.s.metrics.fail(ReasonCIDRConflict)
		c.s.kube.warn(node, ReasonCIDRConflict, "node %s: %s is held by node %s too", node.Name, cf.cidr, cf.other)
	}
}

// AllocateOrOccupyCIDR implements CIDRAllocator: it hands node to its
// loop (started if need be), which syncs it; it fails only once Run has
// returned.
func (c *IPAMController) AllocateOrOccupyCIDR(_ context.Context, node *v1.Node) error {
	return c.toLoop(node, func(n *nodeSync) { n.update(node) })
}

// ReleaseCIDR implements CIDRAllocator: the node's loop releases its
// CIDRs (and, in SyncFromCluster, its cloud ranges) and ends.
func (c *IPAMController) ReleaseCIDR(_ context.Context, node *v1.Node) error {
	return c.toLoop(node, func(n *nodeSync) {
		c.ending[n] = true
		n.remove(node)
	})
}

// toLoop calls send with the live loop of node (a new one if it has none
// or its loop is ending), under c.mu.
func (c *IPAMController) toLoop(node *v1.Node, send func(n *nodeSync)) error {
	if node == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errStopped
	}
	n := c.loops[node.Name]
	if n == nil || c.ending[n] {
		n = c.newLoop(node.Name)
	}
	send(n)
	return nil
}

// newLoop makes the loop of name, which starts after the previous one of
// that name ends; c.mu is held.
func (c *IPAMController) newLoop(name string) *nodeSync {
	var after <-chan struct{}
	if prev := c.loops[name]; prev != nil {
		after = prev.done
	}
	n := newNodeSync(c.s, name, after)
	c.loops[name] = n
	if c.ctx != nil {
		c.spawn(n)
	}
	return n
}

// spawn runs n's loop; c.mu is held and Run runs.
func (c *IPAMController) spawn(n *nodeSync) {
	ctx := c.ctx
	c.live.Add(1)
	c.wg.Go(func() {
		defer c.live.Add(-1)
		n.loop(ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.ending, n)
		if c.loops[n.name] == n {
			delete(c.loops, n.name)
		}
	})
}

// Status returns the state of the cluster ranges (none in SyncFromCloud
// without clusterCIDRs).
func (c *IPAMController) Status() Status {
	c.s.sets.mu.Lock()
	defer c.s.sets.mu.Unlock()
	return Status{Ranges: c.s.sets.book.usage()}
}
