package nodesync

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/servicelabel"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// Resource keywords of the Kubernetes state this plugin reads (the
// controller's dbresources registry; a test checks they match).
const (
	vppNodeResource = vppnode.Keyword
	nodeResource    = node.Keyword
)

// Deps are the plugin's dependencies.
type Deps struct {
	infra.PluginDeps
	// ServiceLabel gives this node's name (the agent label); required.
	ServiceLabel servicelabel.ReaderAPI
	// DB is etcd: the node ID claim and PublishNodeIPs write there (keys
	// under codec.KSRPrefix). Without it both fail with ErrNoDatabase.
	DB kvdb.Store
	// Presence is etcd's lease-bound presence keys: with it a second live
	// agent with this node name is refused. nil turns that check off
	// (logged at Init).
	Presence kvdb.PresenceStore
	// LocalDB (bolt) keeps the last node ID of this node under NodeIDKey so
	// that an ID change is never silent. nil turns that check off (logged).
	LocalDB kvdb.Broker
	// Metrics registers the plugin's metrics; optional.
	Metrics metrics.API
	// StatusCheck hears whether the node has its ID (optional): unready
	// while a claim waits for etcd.
	StatusCheck health.Reporter
	// EventLoop receives the NodeUpdate and NodeIDCheck events (the
	// controller).
	EventLoop api.EventLoop
	// MaxNodeID returns the largest node ID this node's addressing can use
	// (ipam.MaxNodeID of contivconf's ipamConfig: the node subnets the
	// config cuts); it is read at each claim. nil, or 0, bounds IDs only
	// by math.MaxUint32. A claim never tries an ID above it, and fails
	// naming it when every ID up to it is taken.
	MaxNodeID func() uint32
}

// Plugin is nodesync: the node ID claim and its upkeep, the node registry
// and the NodeUpdate events. Build it with NewPlugin.
type Plugin struct {
	Deps

	base  *Config                     // from UseConf
	env   func(string) (string, bool) // environment of the flags
	flags *flag.FlagSet               // from RegisterFlags

	// Set by Init, read-only afterwards.
	cfg         Config
	maxAttempts int             // bound of one claim's transactions
	pick        func(n int) int // index in [0, n) of the candidate to try; nil: namePick; tests fix it
	name        string          // this node
	broker      kvdb.Broker     // DB under codec.KSRPrefix; nil without DB
	presenceKey string          // PresencePrefix + name
	started     time.Time       // when Init ran: part of the presence value
	metrics     *nodesyncMetrics

	// Owned by the event loop: set by Init, and once more before the
	// first presence claim (loadInstance); read-only once a presence was
	// claimed.
	identity []byte // this process, the presence key's value
	instance string // this bolt file's instance (InstanceKey); "" without LocalDB

	nodeID atomic.Uint32         // 0 until claimed, 0 again once lost
	lost   atomic.Pointer[error] // why this node lost its ID or name; nil while it holds them

	// pending is owned by the event loop (Resync and Update only): a
	// re-assert failed for a reason other than a conflict (etcd
	// unreachable) and is retried at the next resync that can reach etcd.
	pending bool

	mu        sync.RWMutex
	nodes     Nodes // by name; entries with ID 0 are known only from k8s
	published bool  // PublishNodeIPs wrote this node's addresses
	stats     claimStats

	publishMu sync.Mutex // serialises PublishNodeIPs

	presMu     sync.Mutex    // guards pres
	pres       kvdb.Presence // this agent's presence; set by the event loop
	presSet    chan struct{} // a new pres was set (buffer 1), for the keeper
	stopKeeper context.CancelFunc
	keeperDone chan struct{}

	retry claimRetry // a claim that failed because etcd did not answer
}

var (
	_ infra.Plugin     = (*Plugin)(nil)
	_ infra.PostInit   = (*Plugin)(nil)
	_ api.EventHandler = (*Plugin)(nil)
	_ API              = (*Plugin)(nil)
)

// Sentinel errors of the claim, its upkeep and PublishNodeIPs.
var (
	// ErrNoDatabase: the plugin was built without DB.
	ErrNoDatabase = errors.New("database is not provided")
	// ErrClaimGaveUp: every attempt of a node ID claim lost its
	// compare-and-swap.
	ErrClaimGaveUp = errors.New("gave up")
	// ErrNoNodeID: PublishNodeIPs was called before the node has an ID.
	ErrNoNodeID = errors.New("this node has no node ID yet")
	// ErrNodeIDConflict: this node's ID record names another node.
	ErrNodeIDConflict = errors.New("node ID conflict")
	// ErrNodeNameTaken: another live agent serves this node name.
	ErrNodeNameTaken = errors.New("node name taken")
	// ErrNodeIDChanged: the claim gave another ID than the stored one and
	// the change was not accepted.
	ErrNodeIDChanged = errors.New("node ID changed")
)

// Init reads the settings and this node's name and registers the metrics.
func (p *Plugin) Init() error {
	if p.ServiceLabel == nil {
		return errors.New("nodesync needs ServiceLabel (the node name)")
	}
	p.name = p.ServiceLabel.GetAgentLabel()
	if p.name == "" {
		return errors.New("nodesync: the agent label (node name) is empty")
	}
	cfg, err := p.loadConfig()
	if err != nil {
		return err
	}
	p.cfg = cfg
	if p.DB != nil {
		p.broker = p.DB.NewBroker(codec.KSRPrefix)
	}
	p.presenceKey, p.started = PresencePrefix+p.name, time.Now()
	p.identity = newIdentity(p.name, p.started, "")
	p.metrics = newNodesyncMetrics()
	if p.Metrics != nil {
		if err := p.Metrics.Register(p.metrics); err != nil {
			return fmt.Errorf("registering nodesync metrics: %w", err)
		}
	}
	if p.Presence == nil {
		p.Log.Warn("no Presence store: a second live agent with this node name would not be detected")
	}
	if p.StatusCheck != nil {
		p.StatusCheck.Register(p.String(), nil) // init until the ID is claimed
	}
	if p.LocalDB == nil {
		p.Log.Warn("no LocalDB: a change of this node's ID across restarts would not be detected")
	}
	p.mu.Lock()
	p.nodes = Nodes{p.name: {Name: p.name}}
	p.mu.Unlock()
	return nil
}

// AfterInit starts the keeper that watches the presence lease.
func (p *Plugin) AfterInit() error {
	if p.Presence == nil || p.stopKeeper != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stopKeeper, p.keeperDone = cancel, make(chan struct{})
	go func() {
		defer close(p.keeperDone)
		p.keep(ctx)
	}()
	return nil
}

// Close stops the keeper and releases the presence key, so that a
// successor with this node name need not wait for the lease to expire. IDs
// stay claimed. Safe twice.
func (p *Plugin) Close() error {
	p.stopRetry()
	if p.stopKeeper != nil {
		p.stopKeeper()
		<-p.keeperDone
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	p.releasePresence(ctx)
	return nil
}

// GetNodeID returns this node's ID: 0 before the first resync claimed it
// and after it was lost.
func (p *Plugin) GetNodeID() uint32 { return p.nodeID.Load() }

// GetAllNodes returns a copy of every known node that has an ID.
func (p *Plugin) GetAllNodes() Nodes {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make(Nodes, len(p.nodes))
	for name, n := range p.nodes {
		if n.ID != 0 {
			out[name] = copyNode(n)
		}
	}
	return out
}

// HandlesEvent is true for every resync, for NodeIDCheck, and for
// Kubernetes state changes of nodes, of other nodes' vppnode records and
// of this node's own record when it was deleted or now names another node.
func (p *Plugin) HandlesEvent(ev api.Event) bool {
	if _, ok := ev.(*NodeIDCheck); ok {
		return true
	}
	if ev.Method().IsResync() {
		return true
	}
	ksc, ok := ev.(*api.KubeStateChange)
	if !ok {
		return false
	}
	switch ksc.Resource {
	case nodeResource:
		return true
	case vppNodeResource:
		if p.isOwnKey(ksc.Key) {
			return !p.namesThisNode(ksc.NewValue) // not the echo of this agent's own write
		}
		return !p.namesThisNode(ksc.PrevValue) && !p.namesThisNode(ksc.NewValue)
	}
	return false
}

// isOwnKey tells whether key is the record key of this node's ID.
func (p *Plugin) isOwnKey(key string) bool {
	id := p.nodeID.Load()
	return id != 0 && key == vppnode.Key(id)
}

// namesThisNode tells whether v is a vppnode record naming this node.
func (p *Plugin) namesThisNode(v proto.Message) bool {
	rec, ok := v.(*vppnode.VppNode)
	return ok && rec.GetName() == p.name
}

// Resync rebuilds the registry from the kube state and keeps this node's
// claim: the first time (and while it has none) it claims an ID; after an
// etcd gap (every remote DB resync) and while a re-assert is pending, it
// re-asserts the presence and the ID record. Conflicts, claim errors and a
// refused ID change are api.FatalError.
func (p *Plugin) Resync(ev api.Event, ks api.KubeStateData, resyncCount int, _ api.ResyncOperations) error {
	if err := p.lostError(); err != nil {
		return api.NewFatalError(err)
	}
	nodes := p.buildNodes(ks)
	me := nodes[p.name]
	if me == nil {
		me = &Node{Name: p.name}
		nodes[p.name] = me
	}
	id, err := p.resyncID(ev, me)
	var transient *transientError
	if errors.As(err, &transient) {
		me.ID = 0
		p.setNodes(nodes, me)
		p.retryClaim(transient)
		return nil
	}
	if err != nil {
		me.ID = 0 // never list this node under an ID it does not hold
		p.setNodes(nodes, me)
		return err
	}
	p.claimed()
	if me.ID != 0 && me.ID != id {
		p.Log.Warn("kube state gives this node another ID; keeping the claimed one",
			"node", p.name, "claimed", id, "kube-state", me.ID)
	}
	me.ID = id
	p.setNodes(nodes, me)
	p.Log.Info("resync", "resync", resyncCount, "node", p.name, "node-id", id, "nodes", len(nodes),
		"reassert-pending", p.pending)
	return nil
}

// resyncID returns this node's ID after the resync ev: taken from the
// mirror, claimed, or kept (re-asserted after a gap).
func (p *Plugin) resyncID(ev api.Event, me *Node) (uint32, error) {
	id := p.nodeID.Load()
	local := isLocalResync(ev)
	switch {
	case id == 0 && me.ID != 0 && local:
		// etcd is unreachable and the bolt mirror of the kube state holds
		// this node's record: that ID was claimed in etcd before. The
		// presence and the record are re-asserted once etcd is back.
		p.Log.Warn("etcd unreachable: node ID taken from the local mirror of the kube state",
			"node", p.name, "node-id", me.ID)
		st, err := p.loadStoredID(context.Background())
		if err == nil {
			err = p.adoptID(st, me.ID, "the local mirror of the kube state")
		}
		if err != nil {
			return 0, api.NewFatalError(err)
		}
		p.nodeID.Store(me.ID)
		p.pending = true
		return me.ID, nil
	case id == 0:
		return p.claim(me)
	case !local && (isDBResync(ev) || p.pending):
		if err := p.reassert(ev.String()); api.IsFatal(err) {
			return 0, err
		}
	}
	return id, nil
}

// setNodes installs a rebuilt registry. Addresses this node published in
// this run win over the (maybe older) kube state's.
func (p *Plugin) setNodes(nodes Nodes, me *Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.nodes[p.name]; p.published && old != nil {
		me.VppIPAddresses = copyVppAddresses(old.VppIPAddresses)
	}
	p.nodes = nodes
}

// Update applies a Kubernetes state change and pushes the NodeUpdate
// events it implies as follow-ups; a change of this node's own record and
// a NodeIDCheck re-assert the claim. It returns a short description.
func (p *Plugin) Update(ev api.Event, txn api.UpdateOperations) (string, error) {
	if chk, ok := ev.(*NodeIDCheck); ok {
		return p.recheck(chk)
	}
	ksc, ok := ev.(*api.KubeStateChange)
	if !ok || !p.HandlesEvent(ev) {
		return "", nil
	}
	var ups []*NodeUpdate
	var desc string
	switch {
	case ksc.Resource == vppNodeResource && p.isOwnKey(ksc.Key):
		return p.ownRecordChanged(ksc)
	case ksc.Resource == vppNodeResource:
		ups, desc = p.applyVppNodeChange(ksc)
	case ksc.Resource == nodeResource:
		ups, desc = p.applyNodeChange(ksc)
	}
	var errs []error
	for _, u := range ups {
		if err := txn.PushFollowUp(u); err != nil {
			errs = append(errs, fmt.Errorf("push %s for node %q: %w", NodeUpdateName, u.NodeName, err))
		}
	}
	return desc, errors.Join(errs...)
}

// Revert does nothing: NodeUpdate and KubeStateChange are BestEffort.
func (p *Plugin) Revert(api.Event) error { return nil }

// isLocalResync tells whether ev is a DB resync from the local mirror.
func isLocalResync(ev api.Event) bool {
	db, ok := ev.(*api.DBResync)
	return ok && db.Local
}

// isDBResync tells whether ev is a DB resync (of either source).
func isDBResync(ev api.Event) bool {
	_, ok := ev.(*api.DBResync)
	return ok
}

// lostError is why this node lost its ID or name, nil while it holds them.
func (p *Plugin) lostError() error {
	if e := p.lost.Load(); e != nil {
		return *e
	}
	return nil
}
