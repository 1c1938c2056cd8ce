package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// patchRetries is how often a node patch is tried before the node is
// handed back to the queue (keeping its CIDRs reserved).
const patchRetries = 3

// Params are what an allocator works with.
type Params struct {
	// Client reads and patches Nodes and writes Events; required.
	Client kubernetes.Interface
	// Nodes is the node informer; required. Run adds its handlers and
	// removes them when it returns.
	Nodes coreinformers.NodeInformer
	// Config is the nodeIPAM section of ksr.conf.
	Config Config
	// Ledger keeps the claims; nil means a MemLedger.
	Ledger Ledger
	// Cloud holds the nodes' ranges for CloudAllocator, IPAMFromCluster
	// and IPAMFromCloud.
	Cloud Cloud
	// Agents tells whether a node's agent may still hold addresses: the
	// CIDRs of a deleted Node stay fenced (handed to no other node) while
	// it may, and are freed only once it has been gone for AgentGrace.
	// nil: no agents to wait for; a deleted Node's CIDRs are freed at
	// once, as Kubernetes does (RangeAllocator only).
	Agents Agents
	// AgentGrace: see Agents; 0 means DefaultAgentGrace.
	AgentGrace time.Duration
	// Metrics counts; nil means metrics that nobody registered.
	Metrics *Metrics
	// Log is the logger; nil means slog.Default().
	Log *slog.Logger
	// Recorder writes the Events; nil means one that writes to Client.
	Recorder record.EventRecorder
}

// holding is what one node holds.
type holding struct {
	uid     types.UID
	cidrs   []netip.Prefix
	pending bool // handed out and claimed, not yet seen on the Node
}

// RangeAllocator cuts node CIDRs from the cluster ranges, one CIDRSet per
// range (dual-stack: one per family), and sets them on the Nodes that have
// none. See the package documentation for the order of its steps.
type RangeAllocator struct {
	kube    *kube
	ledger  Ledger
	metrics *Metrics
	log     *slog.Logger
	nodes   coreinformers.NodeInformer
	workers int
	queue   workqueue.TypedRateLimitingInterface[string]
	agents  Agents // nil: no fences
	grace   time.Duration
	clock   clock.WithDelayedExecution

	mu      sync.Mutex // guards what follows
	book    *blockBook
	held    map[string]*holding   // node -> what it holds
	waiting map[string]bool       // nodes that could not get CIDRs
	fenced  map[string]*cidrFence // deleted nodes whose agent may still hold addresses
}

var _ CIDRAllocator = (*RangeAllocator)(nil)

// NewCIDRRangeAllocator builds the allocator and occupies, before anything
// is handed out, the CIDRs of nodeList (the full list of Nodes) and the
// claims of the ledger that are still pending. A claim of a node that is
// gone, or that holds CIDRs now, is deleted.
func NewCIDRRangeAllocator(ctx context.Context, p Params, nodeList *v1.NodeList, opts ...Option) (*RangeAllocator, error) {
	r, err := newRangeAllocator(p, buildOptions(opts))
	if err != nil {
		return nil, err
	}
	if nodeList != nil {
		for i := range nodeList.Items {
			r.occupyListed(&nodeList.Items[i])
		}
	}
	if err := r.restoreClaims(ctx, nodeList); err != nil {
		return nil, err
	}
	return r, nil
}

func newRangeAllocator(p Params, o options) (*RangeAllocator, error) {
	p = p.withDefaults()
	ranges, err := p.Config.Ranges()
	if err != nil {
		return nil, err
	}
	if len(ranges.Clusters) == 0 {
		return nil, errors.New("nodeipam: clusterCIDRs: the range allocator needs at least one")
	}
	r := &RangeAllocator{
		kube: newKube(p.Client, p.Recorder, p.Log), ledger: p.Ledger, metrics: p.Metrics, log: p.Log,
		nodes: p.Nodes, workers: p.Config.Workers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](p.Config.InitialRetry, p.Config.MaxBackoff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "contiv-nodeipam"}),
		held: make(map[string]*holding), waiting: make(map[string]bool), fenced: make(map[string]*cidrFence),
		agents: p.Agents, grace: p.AgentGrace, clock: o.clock,
	}
	if r.book, err = newBlockBook(p.Config, p.Metrics); err != nil {
		return nil, err
	}
	return r, nil
}

// withDefaults fills the optional params.
func (p Params) withDefaults() Params {
	if p.Ledger == nil {
		p.Ledger = NewMemLedger()
	}
	if p.Metrics == nil {
		p.Metrics = NewMetrics()
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	if p.Config.Workers < 1 {
		p.Config.Workers = 1
	}
	if p.AgentGrace <= 0 {
		p.AgentGrace = DefaultAgentGrace
	}
	return p
}

// occupyListed occupies the CIDRs a listed node holds.
func (r *RangeAllocator) occupyListed(node *v1.Node) {
	cidrs, err := NodeCIDRs(node)
	if err != nil {
		r.metrics.fail(ReasonInvalidPodCIDR)
		r.kube.warn(node, ReasonInvalidPodCIDR, "%v; left as it is", err)
		return
	}
	if len(cidrs) > 0 {
		r.occupy(node, cidrs)
	}
}

// restoreClaims reserves the CIDRs of the pending claims again and deletes
// the claims that are no longer pending. With Agents, the fences are
// restored too (restoreFence), and a pending claim of a node that is gone
// or replaced is fenced: its patch may have landed.
func (r *RangeAllocator) restoreClaims(ctx context.Context, nodeList *v1.NodeList) error {
	claims, err := r.ledger.List(ctx)
	if err != nil {
		return fmt.Errorf("nodeipam: %w", err)
	}
	byName := make(map[string]*v1.Node)
	if nodeList != nil {
		for i := range nodeList.Items {
			byName[nodeList.Items[i].Name] = &nodeList.Items[i]
		}
	}
	for _, c := range claims {
		node := byName[c.Node]
		restored := node != nil && string(node.UID) == c.UID && !hasCIDRs(node) && r.restoreClaim(c)
		if restored {
			r.log.Info("claim restored: the node will be patched with its CIDRs", "node", c.Node, "cidrs", c.CIDRs)
		}
		if r.agents != nil {
			r.restoreFence(c, node, restored)
			if err := r.rewriteRecord(ctx, c); err != nil {
				return fmt.Errorf("nodeipam: %w", err)
			}
			continue
		}
		if restored {
			continue
		}
		if err := r.ledger.Delete(ctx, c.Node); err != nil {
			return fmt.Errorf("nodeipam: %w", err)
		}
		r.log.Info("stale claim deleted", "node", c.Node, "cidrs", c.CIDRs)
	}
	return nil
}

// restoreClaim reserves the claim's CIDRs if every block is free.
func (r *RangeAllocator) restoreClaim(c Claim) bool {
	cidrs, err := parseCIDRs(c.CIDRs)
	if err != nil || len(cidrs) != len(r.book.sets) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.book.adopt(c.Node, cidrs) {
		return false
	}
	r.held[c.Node] = &holding{uid: types.UID(c.UID), cidrs: cidrs, pending: true}
	return true
}

func hasCIDRs(node *v1.Node) bool { return node.Spec.PodCIDR != "" || len(node.Spec.PodCIDRs) > 0 }

// AllocateOrOccupyCIDR implements CIDRAllocator: a node with CIDRs has
// them occupied; one without gets a block of every cluster range, claimed
// in the ledger and then patched onto the Node.
func (r *RangeAllocator) AllocateOrOccupyCIDR(ctx context.Context, node *v1.Node) error {
	if node == nil {
		return nil
	}
	cidrs, err := NodeCIDRs(node)
	if err != nil {
		r.metrics.fail(ReasonInvalidPodCIDR)
		r.kube.warn(node, ReasonInvalidPodCIDR, "%v; left as it is", err)
		return nil
	}
	if len(cidrs) > 0 {
		r.occupy(node, cidrs)
		return nil
	}
	want, from, err := r.reserve(node)
	switch {
	case err != nil:
		r.notAvailable(ctx, node, err)
		return err
	case from == settled:
		return nil
	case from == fresh || from == readopted:
		if err := r.writeRecord(ctx, node.Name); err != nil {
			r.unreserve(node, from)
			return fmt.Errorf("nodeipam: node %s: %w", node.Name, err)
		}
	}
	return r.assign(ctx, node, want)
}

// ReleaseCIDR implements CIDRAllocator: it frees what the node holds
// (blocks that another node holds are never touched) and its claim; with
// Agents, it fences them instead while the node's agent may still hold
// addresses in them.
func (r *RangeAllocator) ReleaseCIDR(ctx context.Context, node *v1.Node) error {
	if node == nil {
		return nil
	}
	return r.gone(ctx, node.Name, node.UID)
}

// Usage is the state of one cluster range.
type Usage struct {
	ClusterCIDR string `json:"clusterCIDR"`
	MaskSize    int    `json:"nodeMaskSize"`
	Size        uint64 `json:"size"`
	Used        uint64 `json:"used"`
	Free        uint64 `json:"free"`
}

// Status is what the allocator holds, for REST.
type Status struct {
	Ranges  []Usage  `json:"ranges"`
	Pending []string `json:"pendingNodes,omitempty"` // handed out, not yet on the Node
	Waiting []string `json:"waitingNodes,omitempty"` // could not get CIDRs
	// Fenced are the deleted Nodes whose agent may still hold addresses
	// in their CIDRs: no other node gets those.
	Fenced []FencedNode `json:"fencedNodes,omitempty"`
}

// Status returns a copy of the allocator's state.
func (r *RangeAllocator) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Status{Ranges: r.book.usage()}
	for name, h := range r.held {
		if h.pending {
			st.Pending = append(st.Pending, name)
		}
	}
	for name := range r.waiting {
		st.Waiting = append(st.Waiting, name)
	}
	slices.Sort(st.Pending)
	slices.Sort(st.Waiting)
	st.Fenced = r.fencedLocked()
	return st
}
