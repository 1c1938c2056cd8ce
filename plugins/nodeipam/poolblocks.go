package nodeipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
)

// Event reasons of the PoolBlockServer (on the Node of the claim or grant).
const (
	// ReasonPoolBlockNotAvailable: a node wants more blocks of a family
	// than the range has free (or there is no range of that family); it
	// gets them when blocks are freed.
	ReasonPoolBlockNotAvailable = "PoolBlockNotAvailable"
	// ReasonPoolBlockConflict: a grant holds a block another node's grant
	// holds too (corrupt state); the first node in key order keeps it,
	// and it is free only once both have dropped it.
	ReasonPoolBlockConflict = "PoolBlockConflict"
	// ReasonPoolBlockOutOfRange: a grant holds a block outside the ranges
	// (the config changed); it stays in the grant, counted as held.
	ReasonPoolBlockOutOfRange = "PoolBlockOutOfRange"
	// ReasonInvalidPoolClaim: a claim could not be decoded, or names
	// another node than its key; it is ignored (the grant stays).
	ReasonInvalidPoolClaim = "InvalidPoolClaim"
)

// writeTimeout bounds one grant write; past it the outcome is unknown.
const writeTimeout = 10 * time.Second

// PoolBlockParams are what a PoolBlockServer works with.
type PoolBlockParams struct {
	// DB is etcd, addressed with full keys (claims and grants live under
	// codec.KSRPrefix); required.
	DB kvdb.Broker
	// Fence returns the compares of the leadership, put into every write;
	// nil writes unfenced (a single replica, tests).
	Fence func() []kvdb.Cmp
	// Client reads Nodes (is a node gone?) and writes Events; required.
	Client kubernetes.Interface
	// Nodes is the node informer; required. Run adds its handlers and
	// removes them when it returns.
	Nodes coreinformers.NodeInformer
	// Config is the poolBlocks section of ksr.conf; it must be enabled.
	Config PoolBlockConfig
	// GenerationKey is the key every grant write bumps; ""
	// means DefaultPoolBlockGenerationKey.
	GenerationKey string
	// InitialRetry and MaxBackoff time the retries of a node whose write
	// failed; 0 means DefaultInitialRetry and DefaultMaxBackoff.
	InitialRetry, MaxBackoff time.Duration
	// AgentGrace is how long a deleted Node's agent must have been seen
	// gone before its blocks are freed; 0 means DefaultAgentGrace.
	AgentGrace time.Duration
	// Clock times the fences (and the presence watch); nil means the
	// real clock.
	Clock clock.WithDelayedExecution
	// Metrics count; nil means metrics that nobody registered.
	Metrics *PoolBlockMetrics
	// Log is the logger; nil means slog.Default().
	Log *slog.Logger
	// Recorder writes the Events; nil means one that writes to Client.
	Recorder record.EventRecorder
}

// poolGrant is what the server knows of one node's grant.
type poolGrant struct {
	blocks []netip.Prefix // as etcd holds them, in grant order
	rev    int64          // their mod revision; 0: no grant in etcd
	// taken are blocks handed to the node by a write not known to have
	// landed (in flight, or of unknown outcome): held in the book until
	// the write's outcome is known.
	taken []netip.Prefix
}

// PoolBlockServer grants the agents' pool claims: it is the server side
// of plugins/ksr/model/poolblock, run by contiv-ksr's leader. See the
// package documentation for the order of its steps and its invariants.
// Build it with NewPoolBlockServer, call Start once, then Run once.
type PoolBlockServer struct {
	db      kvdb.Broker
	fence   func() []kvdb.Cmp
	kube    *kube
	nodes   coreinformers.NodeInformer
	metrics *PoolBlockMetrics
	log     *slog.Logger
	genKey  string
	max     int
	queue   workqueue.TypedRateLimitingInterface[string]
	// agents follows the presence keys of the agents (Run runs it);
	// grace and clock time the fences.
	agents *PresenceWatch
	grace  time.Duration
	clock  clock.WithDelayedExecution

	// Only the worker goroutine writes grants and rereads them; the
	// claim watch and the node handlers update claims, deleted and unmet.
	mu        sync.Mutex // guards what follows
	book      *poolBook
	grants    map[string]*poolGrant
	claims    map[string]poolblock.Claim
	claimRevs map[string]int64 // mod revision of each node's claim key as last seen (valid or not)
	claimRev  int64            // the store revision of Start's list of the claims
	genRev    int64            // the generation key's mod revision as last read or written
	stale     bool             // a write's outcome is unknown: read every grant back first
	deleted   map[string]int   // Node deletes (or replacements) seen and not yet purged
	waiting   map[string]bool
	unmet     map[string]bool
	fenced    map[string]*poolFence // gone nodes whose agent may still hold addresses
}

// Full key prefixes of the claims and grants.
var (
	claimPrefix = codec.KSRPrefix + poolblock.ClaimPrefix
	grantPrefix = codec.KSRPrefix + poolblock.GrantPrefix
)

func claimKey(node string) string { return codec.KSRPrefix + poolblock.ClaimKey(node) }
func grantKey(node string) string { return codec.KSRPrefix + poolblock.GrantKey(node) }

// NewPoolBlockServer checks p and builds the server; nothing is read yet.
func NewPoolBlockServer(p PoolBlockParams) (*PoolBlockServer, error) {
	if p.DB == nil || p.Client == nil || p.Nodes == nil {
		return nil, fmt.Errorf("nodeipam: pool blocks: DB, Client and Nodes are required")
	}
	if !p.Config.Enabled() {
		return nil, fmt.Errorf("nodeipam: pool blocks: clusterCIDRs: none given, the server is off")
	}
	book, err := newPoolBook(p.Config)
	if err != nil {
		return nil, fmt.Errorf("nodeipam: pool blocks: %w", err)
	}
	if p.Metrics == nil {
		p.Metrics = NewPoolBlockMetrics()
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	if p.GenerationKey == "" {
		p.GenerationKey = DefaultPoolBlockGenerationKey
	}
	if p.InitialRetry <= 0 {
		p.InitialRetry = DefaultInitialRetry
	}
	if p.MaxBackoff < p.InitialRetry {
		p.MaxBackoff = max(DefaultMaxBackoff, p.InitialRetry)
	}
	if p.AgentGrace <= 0 {
		p.AgentGrace = DefaultAgentGrace
	}
	if p.Clock == nil {
		p.Clock = clock.RealClock{}
	}
	s := &PoolBlockServer{
		db: p.DB, fence: p.Fence, kube: newKube(p.Client, p.Recorder, p.Log), nodes: p.Nodes,
		metrics: p.Metrics, log: p.Log, genKey: p.GenerationKey, max: p.Config.MaxBlocksPerNode,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](p.InitialRetry, p.MaxBackoff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "contiv-nodeipam-poolblocks"}),
		book: book, grants: make(map[string]*poolGrant), claims: make(map[string]poolblock.Claim), claimRevs: make(map[string]int64),
		deleted: make(map[string]int), waiting: make(map[string]bool), unmet: make(map[string]bool),
		fenced: make(map[string]*poolFence), agents: NewPresenceWatch(p.DB, p.Clock, p.Log), grace: p.AgentGrace, clock: p.Clock,
	}
	s.metrics.gauge(book)
	return s, nil
}

// Start reads every grant and takes its blocks (before anything is handed
// out), then every claim. It writes nothing. A grant that cannot be
// decoded fails it: its blocks are unknown, so nothing could be handed
// out safely; the error names the key and the value.
func (s *PoolBlockServer) Start(ctx context.Context) error {
	if err := s.reread(ctx); err != nil {
		return fmt.Errorf("nodeipam: pool blocks: %w", err)
	}
	kvs, rev, err := s.db.List(ctx, claimPrefix)
	if err != nil {
		return fmt.Errorf("nodeipam: pool blocks: list the claims under %s: %w", claimPrefix, err)
	}
	var reports []poolReport
	s.mu.Lock()
	for _, kv := range kvs {
		reports = append(reports, s.setClaimLocked(kv.Key, kv.Value, kv.Revision)...)
	}
	s.claimRev = rev
	s.gaugeLocked()
	s.mu.Unlock()
	s.report(reports)
	s.log.Info("pool blocks: grants and claims read", "grants", len(s.grants), "claims", len(kvs),
		"ranges", s.usage())
	return nil
}

// reread reads the generation key, then every grant, and makes the book
// hold exactly what the grants hold: blocks no grant holds any more are
// freed, blocks a grant holds that the book did not are taken (a block
// that another node holds already stays that node's: reported). Nodes are
// taken in key order, so at Start the first node of a corrupt double
// grant keeps the block.
func (s *PoolBlockServer) reread(ctx context.Context) error {
	gen, _, err := s.db.Get(ctx, s.genKey)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.genKey, err)
	}
	kvs, _, err := s.db.List(ctx, grantPrefix)
	if err != nil {
		return fmt.Errorf("list the grants under %s: %w", grantPrefix, err)
	}
	listed := make(map[string]poolGrant, len(kvs))
	var order []string
	for _, kv := range kvs {
		node := strings.TrimPrefix(kv.Key, grantPrefix)
		g, err := poolblock.ParseGrant(kv.Value)
		if err != nil {
			return fmt.Errorf("grant %s: %w", kv.Key, err)
		}
		listed[node] = poolGrant{blocks: g.Blocks, rev: kv.Revision}
		order = append(order, node)
	}
	var reports []poolReport
	s.mu.Lock()
	defer func() { s.mu.Unlock(); s.report(reports) }()
	freed := 0
	for node, g := range s.grants { // first what went, so a moved block is free again
		freed += s.dropLocked(node, g, listed[node].blocks)
		if _, ok := listed[node]; !ok {
			delete(s.grants, node)
		}
	}
	for _, node := range order {
		l := listed[node]
		g := s.grants[node]
		if g == nil {
			g = &poolGrant{}
			s.grants[node] = g
		}
		for _, p := range l.blocks {
			if !slices.Contains(g.blocks, p) && !slices.Contains(g.taken, p) {
				reports = append(reports, s.holdLocked(node, p)...)
			}
		}
		g.blocks, g.rev, g.taken = l.blocks, l.rev, nil
	}
	s.genRev, s.stale = gen.Revision, false
	if freed > 0 {
		s.wakeLocked()
	}
	s.gaugeLocked()
	return nil
}

// dropLocked gives up the blocks node holds (its grant and the blocks
// taken for it) that keep does not hold; it returns how many became free.
func (s *PoolBlockServer) dropLocked(node string, g *poolGrant, keep []netip.Prefix) int {
	freed := 0
	for _, p := range slices.Concat(g.blocks, g.taken) {
		if !slices.Contains(keep, p) {
			freed += s.book.drop(node, p)
		}
	}
	return freed
}

// holdLocked takes block p for node, reporting a block outside the
// ranges and one another node holds.
func (s *PoolBlockServer) holdLocked(node string, p netip.Prefix) []poolReport {
	outside, other := s.book.hold(node, p)
	switch {
	case outside:
		return []poolReport{{node, ReasonPoolBlockOutOfRange, fmt.Sprintf(
			"node %s: granted block %s is outside the pool ranges %v (or too large); kept in its grant", node, p, s.rangesLocked())}}
	case other != "":
		return []poolReport{{node, ReasonPoolBlockConflict, fmt.Sprintf(
			"node %s: granted block %s is in the grant of node %s too; %s keeps it, and it is free only once both dropped it",
			node, p, other, other)}}
	}
	return nil
}

// wakeLocked queues the nodes that wait for free blocks.
func (s *PoolBlockServer) wakeLocked() {
	for node := range s.waiting {
		s.queue.Add(node)
	}
}

func (s *PoolBlockServer) gaugeLocked() {
	s.metrics.gauge(s.book)
	s.metrics.pending.Set(float64(len(s.unmet)))
	fenced := make(map[string]int)
	for node := range s.fenced {
		if g := s.grants[node]; g != nil {
			for _, b := range slices.Concat(g.blocks, g.taken) {
				fenced[poolblock.Family(b)]++
			}
		}
	}
	for _, f := range s.book.families() {
		s.metrics.fenced.WithLabelValues(f).Set(float64(fenced[f]))
	}
}

func (s *PoolBlockServer) rangesLocked() []netip.Prefix {
	var out []netip.Prefix
	for _, f := range s.book.families() {
		out = append(out, s.book.sets[f].ClusterCIDR())
	}
	return out
}

// PoolBlockStatus is what the server holds, for REST and tests.
type PoolBlockStatus struct {
	// Ranges are the pool ranges: size, used (granted or being granted)
	// and free blocks.
	Ranges []Usage `json:"ranges"`
	// Grants and Claims are the numbers of nodes with a grant and with a
	// (valid) claim.
	Grants int `json:"grants"`
	Claims int `json:"claims"`
	// Pending are the nodes whose claim is not served yet.
	Pending []string `json:"pendingNodes,omitempty"`
	// Waiting are the nodes that want blocks a full range cannot give.
	Waiting []string `json:"waitingNodes,omitempty"`
	// Fenced are the nodes gone from Kubernetes whose agent may still
	// hold addresses in their blocks: no other node gets those.
	Fenced []FencedNode `json:"fencedNodes,omitempty"`
}

// Status returns a copy of the server's state.
func (s *PoolBlockServer) Status() PoolBlockStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := PoolBlockStatus{Ranges: s.usageLocked(), Claims: len(s.claims)}
	for _, g := range s.grants {
		if g.rev != 0 {
			st.Grants++
		}
	}
	for n := range s.unmet {
		st.Pending = append(st.Pending, n)
	}
	for n := range s.waiting {
		st.Waiting = append(st.Waiting, n)
	}
	slices.Sort(st.Pending)
	slices.Sort(st.Waiting)
	st.Fenced = s.fencedLocked()
	return st
}

func (s *PoolBlockServer) usage() []Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usageLocked()
}

func (s *PoolBlockServer) usageLocked() []Usage {
	var out []Usage
	for _, f := range s.book.families() {
		set := s.book.sets[f]
		out = append(out, Usage{ClusterCIDR: set.ClusterCIDR().String(), MaskSize: set.MaskSize(),
			Size: set.Size(), Used: set.Used(), Free: set.Free()})
	}
	return out
}
