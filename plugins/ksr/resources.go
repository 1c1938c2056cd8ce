package ksr

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// resource is one kind of Kubernetes object the reflector mirrors.
type resource struct {
	// keyword names it in logs, metrics and REST (the model's Keyword).
	keyword string
	// prefixes are the prefixes of its keys, relative to
	// codec.KSRPrefix: every layout's, so that a resync deletes the keys
	// of a layout no longer written.
	prefixes []string
	// informer lists and watches it; its store is what etcd must hold.
	informer cache.SharedIndexInformer
	// keys are the etcd keys (relative to codec.KSRPrefix) of an object:
	// none for a pod the layout does not store (an unscheduled pod in the
	// per-node layout), two for a pod in the layout "both".
	keys func(obj any) ([]string, bool)
	// storeKey is the informer store key of the object stored at an etcd
	// key of prefixes (false: not a key of this resource's shape).
	storeKey func(key string) (string, bool)
	// model is the value to store for an object.
	model func(obj any) (proto.Message, bool)
}

// Pod layouts (ksr.conf podLayout): where pods are written.
const (
	// PodLayoutNode writes each scheduled pod under the node it runs on,
	// pod.NodeKey(node, name, namespace): an agent reads its own node's
	// pods alone. Pods not yet scheduled are not written.
	PodLayoutNode = "node"
	// PodLayoutCluster writes every pod at pod.Key(name, namespace),
	// Contiv's layout: every agent reads every pod.
	PodLayoutCluster = "cluster"
	// PodLayoutBoth writes both, for the upgrade of a cluster whose
	// agents still read the cluster layout.
	PodLayoutBoth = "both"
)

// newResources returns the mirrored resources, informers from factory:
// nodes, pods (in podLayout), namespaces.
func newResources(factory informers.SharedInformerFactory, podLayout string) []*resource {
	core := factory.Core().V1()
	return []*resource{
		{
			keyword: node.Keyword, prefixes: []string{node.KeyPrefix}, informer: core.Nodes().Informer(),
			keys: func(obj any) ([]string, bool) {
				n, ok := obj.(*corev1.Node)
				return []string{node.Key(nameOf(n, ok))}, ok
			},
			storeKey: nameAfter(node.KeyPrefix),
			model: func(obj any) (proto.Message, bool) {
				n, ok := obj.(*corev1.Node)
				if !ok {
					return nil, false
				}
				return nodeModel(n), true
			},
		},
		{
			keyword: pod.Keyword, prefixes: []string{pod.KeyPrefix, pod.NodeKeyPrefix}, informer: core.Pods().Informer(),
			keys: func(obj any) ([]string, bool) {
				p, ok := obj.(*corev1.Pod)
				if !ok {
					return nil, false
				}
				return podKeys(p, podLayout), true
			},
			storeKey: func(key string) (string, bool) {
				_, name, ns, err := pod.ParseAnyKey(key)
				return ns + "/" + name, err == nil
			},
			model: func(obj any) (proto.Message, bool) {
				p, ok := obj.(*corev1.Pod)
				if !ok {
					return nil, false
				}
				return podModel(p), true
			},
		},
		{
			keyword: namespace.Keyword, prefixes: []string{namespace.KeyPrefix}, informer: core.Namespaces().Informer(),
			keys: func(obj any) ([]string, bool) {
				n, ok := obj.(*corev1.Namespace)
				return []string{namespace.Key(nameOf(n, ok))}, ok
			},
			storeKey: nameAfter(namespace.KeyPrefix),
			model: func(obj any) (proto.Message, bool) {
				n, ok := obj.(*corev1.Namespace)
				if !ok {
					return nil, false
				}
				return namespaceModel(n), true
			},
		},
	}
}

// podKeys are the etcd keys of p in layout.
func podKeys(p *corev1.Pod, layout string) []string {
	var out []string
	if layout != PodLayoutNode {
		out = append(out, pod.Key(p.Name, p.Namespace))
	}
	if layout != PodLayoutCluster && p.Spec.NodeName != "" {
		out = append(out, pod.NodeKey(p.Spec.NodeName, p.Name, p.Namespace))
	}
	return out
}

// nameAfter is the storeKey of a cluster-scoped resource whose keys are
// prefix + name.
func nameAfter(prefix string) func(string) (string, bool) {
	return func(key string) (string, bool) {
		name, ok := strings.CutPrefix(key, prefix)
		return name, ok && name != "" && !strings.Contains(name, "/")
	}
}

// named is a Kubernetes object with a name.
type named interface{ GetName() string }

// nameOf is the name of o when ok.
func nameOf(o named, ok bool) string {
	if !ok {
		return ""
	}
	return o.GetName()
}

// desired returns what etcd must hold for this resource: the encoded model
// of every object in the informer's store, by etcd key (relative to
// codec.KSRPrefix). An object that does not encode is left out and
// reported.
func (r *resource) desired() (map[string][]byte, []error) {
	out := make(map[string][]byte)
	var errs []error
	for _, obj := range r.informer.GetStore().List() {
		keys, val, err := r.encode(obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, key := range keys {
			out[key] = val
		}
	}
	return out, errs
}

// lookup returns the keys and the encoded model of the object whose store
// key (the "namespace/name" of the informer) is storeKey; no keys when
// the store no longer holds it.
func (r *resource) lookup(storeKey string) (keys []string, val []byte, err error) {
	obj, exists, err := r.informer.GetStore().GetByKey(storeKey)
	if err != nil || !exists {
		return nil, nil, err
	}
	return r.encode(obj)
}

// encode returns the etcd keys and the value of obj.
func (r *resource) encode(obj any) ([]string, []byte, error) {
	keys, ok := r.keys(obj)
	m, ok2 := r.model(obj)
	if !ok || !ok2 {
		return nil, nil, fmt.Errorf("ksr: %s store holds a %T", r.keyword, obj)
	}
	val, err := codec.Marshal(m)
	if err != nil {
		return nil, nil, fmt.Errorf("ksr: %s %v: %w", r.keyword, keys, err)
	}
	return keys, val, nil
}
