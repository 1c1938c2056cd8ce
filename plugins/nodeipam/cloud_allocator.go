package nodeipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// CloudAllocator copies each node's ranges from the Cloud to the Node,
// once: a node with CIDRs is left as it is; one without has the cloud's
// ranges patched onto it. When the cloud has none yet (or fails) the node
// is retried with the backoff of a Timeout (InitialRetry, doubling, up to
// MaxBackoff). The cluster ranges, when configured, are only a check: a
// cloud range outside them is reported (ReasonCIDROutOfRange) and set.
type CloudAllocator struct {
	kube     *kube
	cloud    Cloud
	clusters []netip.Prefix
	metrics  *Metrics
	log      *slog.Logger
	nodes    coreinformers.NodeInformer
	workers  int
	queue    workqueue.TypedRateLimitingInterface[string]
	limiter  *timeoutLimiter

	mu     sync.Mutex        // guards warned
	warned map[string]string // node -> its last warning, until it succeeds
}

var _ CIDRAllocator = (*CloudAllocator)(nil)

// NewCloudCIDRAllocator builds the allocator; p.Cloud, p.Client and
// p.Nodes are required. nodeList is not needed (the allocator keeps no
// state of the nodes' CIDRs): Run sees every node through the informer.
func NewCloudCIDRAllocator(_ context.Context, p Params, _ *v1.NodeList, opts ...Option) (*CloudAllocator, error) {
	if err := checkCloudParams(p); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	ranges, err := p.Config.Ranges()
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	o := buildOptions(opts)
	limiter := &timeoutLimiter{timing: Timeout{Resync: p.Config.Resync, MaxBackoff: p.Config.MaxBackoff,
		InitialRetry: p.Config.InitialRetry}, items: make(map[string]*Timeout)}
	return &CloudAllocator{
		kube: newKube(p.Client, p.Recorder, p.Log), cloud: p.Cloud, clusters: ranges.Clusters,
		metrics: p.Metrics, log: p.Log, nodes: p.Nodes, workers: p.Config.Workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig[string](limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "contiv-nodeipam-cloud", Clock: o.clock}),
		limiter: limiter,
		warned:  make(map[string]string),
	}, nil
}

// AllocateOrOccupyCIDR implements CIDRAllocator: a node without CIDRs is
// patched with the cloud's ranges. The error wraps ErrNoCloudRanges when
// the cloud has none for it (a warning, ReasonCIDRNotAvailable, is
// emitted the first time).
func (c *CloudAllocator) AllocateOrOccupyCIDR(ctx context.Context, node *v1.Node) error {
	if node == nil {
		return nil
	}
	have, err := NodeCIDRs(node)
	if err != nil {
		c.metrics.fail(ReasonInvalidPodCIDR)
		c.warnOnce(node, ReasonInvalidPodCIDR, fmt.Sprintf("%v; left as it is", err))
		return nil
	}
	if len(have) > 0 {
		return nil
	}
	ranges, err := c.cloud.NodeRanges(ctx, node.Name)
	if err != nil {
		c.metrics.fail("cloud")
		return fmt.Errorf("node %s: %w", node.Name, err)
	}
	if len(ranges) == 0 {
		c.metrics.fail(ReasonCIDRNotAvailable)
		c.warnOnce(node, ReasonCIDRNotAvailable, fmt.Sprintf("node %s: the cloud has no ranges for it yet; retrying", node.Name))
		return fmt.Errorf("node %s: %w", node.Name, ErrNoCloudRanges)
	}
	c.checkRanges(node, ranges)
	if _, err := c.kube.patchCIDRs(ctx, node.Name, ranges); err != nil {
		c.metrics.fail(ReasonCIDRAssignmentFailed)
		return fmt.Errorf("node %s: set its pod CIDRs %v: %w", node.Name, ranges, err)
	}
	c.log.Info("node pod CIDRs set from the cloud", "node", node.Name, "cidrs", ranges)
	if c.forgetWarning(node.Name) {
		c.kube.normal(node, ReasonCIDRAssigned, "node %s got pod CIDRs %v from the cloud", node.Name, ranges)
	}
	return nil
}

// ReleaseCIDR implements CIDRAllocator: the cloud owns the ranges, so only
// the node's retry state is dropped.
func (c *CloudAllocator) ReleaseCIDR(_ context.Context, node *v1.Node) error {
	if node != nil {
		c.forgetWarning(node.Name)
	}
	return nil
}

// checkRanges reports the ranges outside the cluster ranges, if any are
// configured.
func (c *CloudAllocator) checkRanges(node *v1.Node, ranges []netip.Prefix) {
	if len(c.clusters) == 0 {
		return
	}
	for _, p := range ranges {
		if !containedIn(p, c.clusters) {
			c.metrics.fail(ReasonCIDROutOfRange)
			c.kube.warn(node, ReasonCIDROutOfRange, "node %s: the cloud's range %s is outside the cluster ranges %v; set anyway",
				node.Name, p, c.clusters)
		}
	}
}

// containedIn tells whether p lies inside one of clusters.
func containedIn(p netip.Prefix, clusters []netip.Prefix) bool {
	for _, c := range clusters {
		if c.Bits() <= p.Bits() && c.Contains(p.Masked().Addr()) {
			return true
		}
	}
	return false
}

// warnOnce emits a Warning unless it is the node's last one.
func (c *CloudAllocator) warnOnce(node *v1.Node, reason, msg string) {
	key := reason + "\x00" + msg
	c.mu.Lock()
	seen := c.warned[node.Name] == key
	c.warned[node.Name] = key
	c.mu.Unlock()
	if !seen {
		c.kube.warn(node, reason, "%s", msg)
	}
}

// forgetWarning drops the node's last warning and tells whether it had one.
func (c *CloudAllocator) forgetWarning(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, had := c.warned[name]
	delete(c.warned, name)
	return had
}

// Run implements CIDRAllocator: it queues every node without CIDRs that
// the informer has or adds, and handles them with Config.Workers
// goroutines until stop closes.
func (c *CloudAllocator) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer c.kube.stop()
	reg, err := c.nodes.Informer().AddEventHandler(c.handlers())
	if err != nil {
		c.log.Error("node informer refused the handlers", "err", err)
		return
	}
	defer func() { _ = c.nodes.Informer().RemoveEventHandler(reg) }()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(stop, reg.HasSynced) {
		return
	}
	c.log.Info("cloud CIDR allocator running", "workers", c.workers)
	for range c.workers {
		wg.Go(func() { c.work(ctx) })
	}
	<-stop
}

// handlers queue the nodes without CIDRs, and the deleted ones (their
// retries are dropped).
func (c *CloudAllocator) handlers() cache.ResourceEventHandler {
	add := func(obj any) {
		if node, ok := obj.(*v1.Node); ok && !hasCIDRs(node) {
			c.queue.Add(node.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: func(obj any) {
			if node := deletedNode(obj); node != nil {
				c.queue.Add(node.Name)
			}
		},
	}
}

// work handles queued nodes until the queue shuts down.
func (c *CloudAllocator) work(ctx context.Context) {
	for {
		name, quit := c.queue.Get()
		if quit {
			return
		}
		if err := c.handle(ctx, name); err != nil {
			c.log.Debug("node retried with backoff", "node", name, "err", err)
			c.queue.AddRateLimited(name)
		} else {
			c.queue.Forget(name)
		}
		c.queue.Done(name)
	}
}

// handle syncs the node as the informer has it; a node that is gone has
// its retry state dropped.
func (c *CloudAllocator) handle(ctx context.Context, name string) error {
	node, err := c.nodes.Lister().Get(name)
	if apierrors.IsNotFound(err) {
		c.forgetWarning(name)
		return nil
	}
	if err != nil {
		return err
	}
	return c.AllocateOrOccupyCIDR(ctx, node)
}

// timeoutLimiter is the queue's rate limiter: each node's retries wait
// as its own Timeout says. Safe for concurrent use.
type timeoutLimiter struct {
	timing Timeout
	mu     sync.Mutex
	items  map[string]*Timeout
}

var _ workqueue.TypedRateLimiter[string] = (*timeoutLimiter)(nil)

// When records a failure of item and returns its backoff.
func (l *timeoutLimiter) When(item string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.items[item]
	if t == nil {
		t = new(Timeout)
		*t = l.timing
		l.items[item] = t
	}
	t.Update(false)
	return t.Next()
}

// Forget drops item's backoff.
func (l *timeoutLimiter) Forget(item string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.items, item)
}

// NumRequeues returns item's consecutive failures.
func (l *timeoutLimiter) NumRequeues(item string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.items[item]; t != nil {
		return t.errs
	}
	return 0
}
