package ksr

import (
	"fmt"

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
	// prefix is the prefix of its keys, relative to codec.KSRPrefix.
	prefix string
	// informer lists and watches it; its store is what etcd must hold.
	informer cache.SharedIndexInformer
	// key is the etcd key (relative to codec.KSRPrefix) of an object.
	key func(obj any) (string, bool)
	// model is the value to store for an object.
	model func(obj any) (proto.Message, bool)
}

// newResources returns the mirrored resources, informers from factory:
// nodes, pods, namespaces.
func newResources(factory informers.SharedInformerFactory) []*resource {
	core := factory.Core().V1()
	return []*resource{
		{
			keyword: node.Keyword, prefix: node.KeyPrefix, informer: core.Nodes().Informer(),
			key: func(obj any) (string, bool) {
				n, ok := obj.(*corev1.Node)
				return node.Key(nameOf(n, ok)), ok
			},
			model: func(obj any) (proto.Message, bool) {
				n, ok := obj.(*corev1.Node)
				if !ok {
					return nil, false
				}
				return nodeModel(n), true
			},
		},
		{
			keyword: pod.Keyword, prefix: pod.KeyPrefix, informer: core.Pods().Informer(),
			key: func(obj any) (string, bool) {
				p, ok := obj.(*corev1.Pod)
				if !ok {
					return "", false
				}
				return pod.Key(p.Name, p.Namespace), true
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
			keyword: namespace.Keyword, prefix: namespace.KeyPrefix, informer: core.Namespaces().Informer(),
			key: func(obj any) (string, bool) {
				n, ok := obj.(*corev1.Namespace)
				return namespace.Key(nameOf(n, ok)), ok
			},
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
		key, val, err := r.encode(obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[key] = val
	}
	return out, errs
}

// lookup returns the encoded model of the object whose store key (the
// "namespace/name" of the informer) is storeKey; found is false when the
// store no longer holds it.
func (r *resource) lookup(storeKey string) (val []byte, found bool, err error) {
	obj, exists, err := r.informer.GetStore().GetByKey(storeKey)
	if err != nil || !exists {
		return nil, false, err
	}
	_, val, err = r.encode(obj)
	return val, err == nil, err
}

// encode returns the etcd key and value of obj.
func (r *resource) encode(obj any) (string, []byte, error) {
	key, ok := r.key(obj)
	m, ok2 := r.model(obj)
	if !ok || !ok2 {
		return "", nil, fmt.Errorf("ksr: %s store holds a %T", r.keyword, obj)
	}
	val, err := codec.Marshal(m)
	if err != nil {
		return "", nil, fmt.Errorf("ksr: %s %q: %w", r.keyword, key, err)
	}
	return key, val, nil
}

// keyOfStoreKey is the etcd key of the object whose store key is
// storeKey ("name" for cluster-scoped objects, "namespace/name" else).
func (r *resource) keyOfStoreKey(storeKey string) (string, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(storeKey)
	if err != nil {
		return "", fmt.Errorf("ksr: %s store key %q: %w", r.keyword, storeKey, err)
	}
	if r.keyword == pod.Keyword {
		return pod.Key(name, ns), nil
	}
	return r.prefix + name, nil
}
