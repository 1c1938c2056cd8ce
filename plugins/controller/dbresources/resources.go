package dbresources

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// Resource is one kind of Kubernetes state under codec.KSRPrefix.
type Resource struct {
	// Keyword names the resource in api.KubeStateData ("node", "pod", ...).
	Keyword string
	// KeyPrefix is the prefix of the resource's keys, relative to
	// codec.KSRPrefix; it ends with "/".
	KeyPrefix string
	// Also are further prefixes of the resource's keys (pods: the
	// per-node layout, pod.NodeKeyPrefix), relative to codec.KSRPrefix.
	Also []string
	// New returns an empty value to decode one stored value into.
	New func() proto.Message
}

// Prefixes are the resource's KeyPrefix and Also.
func (r Resource) Prefixes() []string {
	return append([]string{r.KeyPrefix}, r.Also...)
}

// ErrUnknownKey is wrapped by Decode when no resource's prefix matches the
// key.
var ErrUnknownKey = errors.New("key of no known resource")

// resources is the registry, in the order All returns. Resources without
// a model of ours decode into a generic JSON object.
var resources = []Resource{
	{Keyword: vppnode.Keyword, KeyPrefix: vppnode.KeyPrefix, New: func() proto.Message { return new(vppnode.VppNode) }},
	{Keyword: node.Keyword, KeyPrefix: node.KeyPrefix, New: func() proto.Message { return new(node.Node) }},
	{Keyword: pod.Keyword, KeyPrefix: pod.KeyPrefix, Also: []string{pod.NodeKeyPrefix}, New: func() proto.Message { return new(pod.Pod) }},
	structResource("nodeconfig", nodeConfigPrefix),
	{Keyword: namespace.Keyword, KeyPrefix: namespace.KeyPrefix, New: func() proto.Message { return new(namespace.Namespace) }},
	structResource("policy", "k8s/policy/"),
	structResource("service", "k8s/service/"),
	structResource("endpoints", "k8s/endpoints/"),
	structResource("customnetwork", "k8s/customnetwork/"),
	structResource("external-interface", "k8s/external-interface/"),
	structResource("servicefunctionchain", "k8s/servicefunctionchain/"),
	structResource("custom-ipam", "custom-ipam/"),
	structResource("idalloc", "idalloc/"),
	structResource(poolblock.ClaimKeyword, poolblock.ClaimPrefix),
	structResource(poolblock.GrantKeyword, poolblock.GrantPrefix),
	structResource(mirror.Keyword, mirror.KeyPrefix),
}

// structResource is a resource whose values are any JSON object.
func structResource(keyword, prefix string) Resource {
	return Resource{Keyword: keyword, KeyPrefix: prefix, New: func() proto.Message { return new(structpb.Struct) }}
}

// All returns every resource in a fixed order: vppnode, node, pod, then
// the resources without a model of ours. The slice is a copy.
func All() []Resource {
	return append([]Resource(nil), resources...)
}

// Keywords returns the keywords of All, in the same order.
func Keywords() []string {
	out := make([]string, len(resources))
	for i, r := range resources {
		out[i] = r.Keyword
	}
	return out
}

// ByKey returns the resource whose KeyPrefix is the longest prefix of key
// (relative to codec.KSRPrefix), and false when none is.
func ByKey(key string) (Resource, bool) {
	return byKey(resources, key)
}

func byKey(rs []Resource, key string) (Resource, bool) {
	var best Resource
	bestLen, found := 0, false
	for _, r := range rs {
		for _, p := range r.Prefixes() {
			if strings.HasPrefix(key, p) && (!found || len(p) > bestLen) {
				best, bestLen, found = r, len(p), true
			}
		}
	}
	return best, found
}

// Pod layouts: where contiv-ksr writes pods, and so what an agent lists
// and watches.
const (
	// PodLayoutNode: under pod.NodePrefix(node) of the node each pod is
	// scheduled to. An agent reads its own node's pods alone.
	PodLayoutNode = "node"
	// PodLayoutCluster: under pod.KeyPrefix, every pod of the cluster
	// (Contiv's layout). Every agent reads every pod.
	PodLayoutCluster = "cluster"
)

// WatchPrefixes returns what an agent of node lists and watches (relative
// to codec.KSRPrefix): what its handlers read and nothing else. A prefix
// ends with "/"; an entry without a trailing "/" is one exact key.
//
//   - vppnode.KeyPrefix and node.KeyPrefix: every node's ID record and
//     Node (nodesync);
//   - pods: pod.NodePrefix(node) (layout PodLayoutNode) or pod.KeyPrefix
//     (PodLayoutCluster) (ipam);
//   - this node's NodeConfig (contivconf), its pool grant (ipam's elastic
//     pools) and contiv-ksr's mirror marker (ipam): exact keys.
//
// Namespaces, policies, services and the other resources of the registry
// are read by no handler of ours: they are left to etcd. No entry covers
// another, so each key is read once. An unknown layout or a node name
// that cannot be in a key is an error naming it.
func WatchPrefixes(nodeName, podLayout string) ([]string, error) {
	if nodeName == "" || strings.Contains(nodeName, "/") {
		return nil, fmt.Errorf("pod layout %q: node name %q: want a non-empty name without \"/\"", podLayout, nodeName)
	}
	var pods string
	switch podLayout {
	case PodLayoutNode:
		pods = pod.NodePrefix(nodeName)
	case PodLayoutCluster:
		pods = pod.KeyPrefix
	default:
		return nil, fmt.Errorf("pod layout %q: want %q or %q", podLayout, PodLayoutNode, PodLayoutCluster)
	}
	return []string{vppnode.KeyPrefix, node.KeyPrefix, pods, nodeConfigPrefix + nodeName,
		poolblock.GrantKey(nodeName), mirror.Key}, nil
}

// nodeConfigPrefix is the prefix of the NodeConfig resource's keys, each
// node's at nodeConfigPrefix + node.
const nodeConfigPrefix = "k8s/nodeconfig/"

// Decode finds the resource of key (relative to codec.KSRPrefix) and
// decodes data into a new value of it with codec.Unmarshal. Errors quote
// key; a key of no resource gives an error wrapping ErrUnknownKey.
func Decode(key string, data []byte) (keyword string, value proto.Message, err error) {
	r, ok := ByKey(key)
	if !ok {
		if strings.HasPrefix(key, codec.KSRPrefix) {
			return "", nil, fmt.Errorf("%w: %q (keys are relative to %q)", ErrUnknownKey, key, codec.KSRPrefix)
		}
		return "", nil, fmt.Errorf("%w: %q", ErrUnknownKey, key)
	}
	value = r.New()
	if err := codec.Unmarshal(data, value); err != nil {
		return "", nil, fmt.Errorf("decode %s key %q: %w", r.Keyword, key, err)
	}
	return r.Keyword, value, nil
}
