package nodesync

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/kvdb"
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
	// EventLoop receives the NodeUpdate events (the controller).
	EventLoop api.EventLoop
}

// Plugin is nodesync: the node ID claim, the node registry and the
// NodeUpdate events. Build it with NewPlugin.
type Plugin struct {
	Deps

	maxAttempts int         // bound of one claim's transactions
	name        string      // this node, set by Init
	broker      kvdb.Broker // DB under codec.KSRPrefix; nil without DB

	nodeID atomic.Uint32 // 0 until claimed; never changes afterwards

	mu        sync.RWMutex
	nodes     Nodes // by name; entries with ID 0 are known only from k8s
	published bool  // PublishNodeIPs wrote this node's addresses

	publishMu sync.Mutex // serialises PublishNodeIPs

	stats claimStats // of the last claim, for logs and tests
}

var (
	_ infra.Plugin     = (*Plugin)(nil)
	_ api.EventHandler = (*Plugin)(nil)
	_ API              = (*Plugin)(nil)
)

// Sentinel errors of the claim and of PublishNodeIPs.
var (
	// ErrNoDatabase: the plugin was built without DB.
	ErrNoDatabase = errors.New("database is not provided")
	// ErrClaimGaveUp: every attempt of a node ID claim lost its
	// compare-and-swap.
	ErrClaimGaveUp = errors.New("gave up")
	// ErrNoNodeID: PublishNodeIPs was called before the node has an ID.
	ErrNoNodeID = errors.New("this node has no node ID yet")
)

// Init reads this node's name from ServiceLabel.
func (p *Plugin) Init() error {
	if p.ServiceLabel == nil {
		return errors.New("nodesync needs ServiceLabel (the node name)")
	}
	p.name = p.ServiceLabel.GetAgentLabel()
	if p.name == "" {
		return errors.New("nodesync: the agent label (node name) is empty")
	}
	if p.DB != nil {
		p.broker = p.DB.NewBroker(codec.KSRPrefix)
	}
	p.mu.Lock()
	p.nodes = Nodes{p.name: {Name: p.name}}
	p.mu.Unlock()
	return nil
}

// Close does nothing: IDs stay claimed and nothing runs in the background.
func (p *Plugin) Close() error { return nil }

// GetNodeID returns this node's ID, 0 before the first resync claimed it.
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

// HandlesEvent is true for every resync and for Kubernetes state changes
// of nodes and of other nodes' vppnode records.
func (p *Plugin) HandlesEvent(ev api.Event) bool {
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
		return !p.isOwnRecord(ksc)
	}
	return false
}

// isOwnRecord tells whether a vppnode change concerns this node's record:
// the key of its ID, or a value naming it.
func (p *Plugin) isOwnRecord(ksc *api.KubeStateChange) bool {
	if id := p.nodeID.Load(); id != 0 && ksc.Key == vppnode.Key(id) {
		return true
	}
	for _, v := range []proto.Message{ksc.PrevValue, ksc.NewValue} {
		if rec, ok := v.(*vppnode.VppNode); ok && rec.GetName() == p.name {
			return true
		}
	}
	return false
}

// Resync rebuilds the registry from the kube state and, while this node
// has no ID, claims one. Claim errors are api.FatalError.
func (p *Plugin) Resync(ev api.Event, ks api.KubeStateData, resyncCount int, _ api.ResyncOperations) error {
	nodes := p.buildNodes(ks)
	me := nodes[p.name]
	if me == nil {
		me = &Node{Name: p.name}
		nodes[p.name] = me
	}
	id := p.nodeID.Load()
	if id == 0 && me.ID != 0 && isLocalResync(ev) {
		// etcd is unreachable and the bolt mirror of the kube state holds
		// this node's record: that ID was claimed in etcd before.
		p.Log.Warn("etcd unreachable: node ID taken from the local mirror of the kube state",
			"node", p.name, "node-id", me.ID)
		id = me.ID
		p.nodeID.Store(id)
	}
	if id == 0 {
		claimed, rec, err := p.claimNodeID()
		if err != nil {
			p.setNodes(nodes, me)
			return api.NewFatalError(err)
		}
		id = claimed
		p.nodeID.Store(id)
		if rec != nil && len(me.VppIPAddresses) == 0 {
			me.VppIPAddresses = p.parseVppAddresses(rec)
		}
	}
	if me.ID != 0 && me.ID != id {
		p.Log.Warn("kube state gives this node another ID; keeping the claimed one",
			"node", p.name, "claimed", id, "kube-state", me.ID)
	}
	me.ID = id
	p.setNodes(nodes, me)
	p.Log.Info("resync", "resync", resyncCount, "node", p.name, "node-id", id, "nodes", len(nodes))
	return nil
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
// events it implies as follow-ups. It returns a short description of the
// change.
func (p *Plugin) Update(ev api.Event, txn api.UpdateOperations) (string, error) {
	ksc, ok := ev.(*api.KubeStateChange)
	if !ok || !p.HandlesEvent(ev) {
		return "", nil
	}
	var ups []*NodeUpdate
	var desc string
	switch ksc.Resource {
	case vppNodeResource:
		ups, desc = p.applyVppNodeChange(ksc)
	case nodeResource:
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
