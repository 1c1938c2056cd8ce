package contivconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// NodeConfigResource is the KubeStateData keyword of NodeConfig CRDs, and
// NodeConfigKeyPrefix the prefix of their keys (relative to the KSR prefix).
const (
	NodeConfigResource  = "nodeconfig"
	NodeConfigKeyPrefix = "k8s/nodeconfig/"
)

// NodeConfigKey is the kube-state key of node's NodeConfig CRD.
func NodeConfigKey(node string) string { return NodeConfigKeyPrefix + node }

// NodeConfigChange tells every handler that this node's configuration
// changed (its NodeConfig CRD was created, changed or deleted): as an
// UpstreamResync it makes them all resync.
type NodeConfigChange struct {
	// NodeName is this node.
	NodeName string
	// NodeConfig is the node's new configuration (what GetNodeConfig now
	// returns); nil when it has none.
	NodeConfig *NodeConfig
}

// NodeConfigChangeName is the name of NodeConfigChange events.
const NodeConfigChangeName = "Node Configuration Change"

// GetName returns "Node Configuration Change".
func (ev *NodeConfigChange) GetName() string { return NodeConfigChangeName }

// String names the node and shows its new configuration.
func (ev *NodeConfigChange) String() string {
	cfg := "none"
	if ev.NodeConfig != nil {
		if b, err := json.Marshal(ev.NodeConfig); err == nil {
			cfg = string(b)
		}
	}
	return fmt.Sprintf("%s (node %q: %s)", NodeConfigChangeName, ev.NodeName, cfg)
}

// Method is UpstreamResync.
func (ev *NodeConfigChange) Method() api.EventMethodType { return api.UpstreamResync }

// IsBlocking is false.
func (ev *NodeConfigChange) IsBlocking() bool { return false }

// Done does nothing.
func (ev *NodeConfigChange) Done(error) {}

// HandlesEvent selects every resync and, when CRD node configuration is
// enabled, the changes of this node's NodeConfig CRD.
func (p *Plugin) HandlesEvent(ev api.Event) bool {
	if ev.Method().IsResync() {
		return true
	}
	ksc, ok := ev.(*api.KubeStateChange)
	return ok && p.ownsChange(ksc)
}

// ownsChange: the change is of this node's NodeConfig CRD and CRDs count.
func (p *Plugin) ownsChange(ksc *api.KubeStateChange) bool {
	return p.parsed != nil && !p.conf.CRDNodeConfigurationDisabled &&
		ksc.Resource == NodeConfigResource && ksc.Key == NodeConfigKey(p.nodeName)
}

// Resync re-reads this node's NodeConfig CRD from the kube state (when CRD
// node configuration is enabled): it takes priority over the nodeConfig
// entry of contiv.conf. A CRD value that does not convert or validate is
// never an error (it would stop the agent at every resync): it is logged
// and counted, and the configuration in use stays (see invalidCRD).
func (p *Plugin) Resync(_ api.Event, ks api.KubeStateData, _ int, _ api.ResyncOperations) error {
	if p.parsed == nil {
		return errors.New("contivconf: Resync before Init")
	}
	var crd *NodeConfig
	if !p.conf.CRDNodeConfigurationDisabled {
		key := NodeConfigKey(p.nodeName)
		if v := ks[NodeConfigResource][key]; v != nil {
			n, err := nodeConfigFromKube(key, p.nodeName, v, p.parsed.gwFamily)
			if err != nil {
				p.invalidCRD(err)
				return nil
			}
			crd = n
		}
	}
	p.setCRDNode(crd)
	p.validCRD()
	return nil
}

// Update applies a change of this node's NodeConfig CRD and, when the
// node's configuration really changed, pushes a NodeConfigChange so that
// every handler resyncs with it.
func (p *Plugin) Update(ev api.Event, txn api.UpdateOperations) (string, error) {
	ksc, ok := ev.(*api.KubeStateChange)
	if !ok || !p.ownsChange(ksc) {
		return "", nil
	}
	var crd *NodeConfig
	if ksc.NewValue != nil {
		n, err := nodeConfigFromKube(ksc.Key, p.nodeName, ksc.NewValue, p.parsed.gwFamily)
		if err != nil {
			p.invalidCRD(err)
			return fmt.Sprintf("ignored: %v; the node configuration in use stays", err), nil
		}
		crd = n
	}
	changed := p.setCRDNode(crd)
	p.validCRD()
	if !changed {
		return "", nil
	}
	change := &NodeConfigChange{NodeName: p.nodeName, NodeConfig: p.GetNodeConfig()}
	desc := "node configuration from the NodeConfig CRD"
	if crd == nil {
		desc = "NodeConfig CRD removed: node configuration from contiv.conf"
	}
	p.Log.Info("node configuration changed", "node", p.nodeName, "change", desc)
	if err := txn.PushFollowUp(change); err != nil {
		return desc, fmt.Errorf("pushing %s: %w", change.GetName(), err)
	}
	return desc, nil
}

// Revert does nothing (KubeStateChange is BestEffort).
func (p *Plugin) Revert(api.Event) error { return nil }

// setCRDNode stores this node's CRD configuration (nil = none) and
// recomputes the default gateway; it reports whether the effective node
// configuration changed.
func (p *Plugin) setCRDNode(crd *NodeConfig) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	before := p.effectiveNode()
	p.crdNode = crd
	p.gw = staticDefaultGW(&p.parsed.IPAM, p.effectiveNode())
	return !equalNodeConfig(before, p.effectiveNode())
}

// equalNodeConfig compares by value; a nil and an empty interface list are
// equal.
func equalNodeConfig(a, b *NodeConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.NodeName == b.NodeName && a.MainVPPInterface == b.MainVPPInterface &&
		slices.Equal(a.OtherVPPInterfaces, b.OtherVPPInterfaces) && a.StealInterface == b.StealInterface &&
		a.Gateway == b.Gateway && a.NatExternalTraffic == b.NatExternalTraffic
}

// nodeConfigFromKube converts a NodeConfig CRD value of the kube state. The
// value is a JSON object (a *structpb.Struct, or any message protojson
// renders as one) holding the spec fields with the names of a nodeConfig
// entry (mainVPPInterface, otherVPPInterfaces, stealInterface, gateway,
// natExternalTraffic; snake_case proto names are accepted too). A CRD object
// with a "spec" member is reduced to the spec. "name" and "nodeName" are
// ignored: the key names the node. Unknown keys and bad values are errors
// naming key; the gateway must be of gwFamily's address family.
func nodeConfigFromKube(key, node string, v proto.Message, gwFamily subnet) (*NodeConfig, error) {
	obj, err := messageToMap(v)
	if err != nil {
		return nil, fmt.Errorf("%s key %q: %w", NodeConfigResource, key, err)
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		obj = spec
	}
	norm, err := normalizeKeys(obj)
	if err != nil {
		return nil, fmt.Errorf("%s key %q: %w", NodeConfigResource, key, err)
	}
	m := norm.(map[string]any)
	delete(m, "name")
	delete(m, "nodename")
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s key %q: %w", NodeConfigResource, key, err)
	}
	var n NodeConfig
	if err := config.Decode(data, &n, fmt.Sprintf("%s key %q", NodeConfigResource, key)); err != nil {
		return nil, err
	}
	n.NodeName = node
	if errs := checkNode(fmt.Sprintf("%s key %q: ", NodeConfigResource, key), &n, gwFamily); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &n, nil
}

// messageToMap renders v as a JSON object.
func messageToMap(v proto.Message) (map[string]any, error) {
	if s, ok := v.(*structpb.Struct); ok {
		return s.AsMap(), nil
	}
	data, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("value of type %T is not a JSON object: %w", v, err)
	}
	return m, nil
}

// normalizeKeys lower-cases object keys and drops '_' (so main_vpp_interface
// matches mainVPPInterface), recursively; two keys that become equal are an
// error.
func normalizeKeys(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		orig := make(map[string]string, len(t))
		for k, val := range t {
			nk := strings.ToLower(strings.ReplaceAll(k, "_", ""))
			if prev, dup := orig[nk]; dup {
				return nil, fmt.Errorf("keys %q and %q mean the same field", prev, k)
			}
			nv, err := normalizeKeys(val)
			if err != nil {
				return nil, err
			}
			out[nk], orig[nk] = nv, k
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			nv, err := normalizeKeys(e)
			if err != nil {
				return nil, err
			}
			out[i] = nv
		}
		return out, nil
	}
	return v, nil
}
