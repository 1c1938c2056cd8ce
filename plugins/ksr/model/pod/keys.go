package pod

import (
	"errors"
	"fmt"
	"strings"
)

// KeyPrefix is the prefix of every pod key, relative to codec.KSRPrefix.
const KeyPrefix = "k8s/pod/"

// Keyword names the resource of pods in the controller's Kubernetes
// state (the key of api.KubeStateData, KubeStateChange.Resource).
const Keyword = "pod"

// namespaceTag separates the pod name from its namespace in a key.
const namespaceTag = "/namespace/"

// ErrInvalidKey is wrapped by every ParseKey error.
var ErrInvalidKey = errors.New("invalid pod key")

// Key returns the key of the pod name in namespace:
// KeyPrefix + name + "/namespace/" + namespace. It does not validate its
// arguments; ParseKey reverses it for every non-empty name and namespace
// without "/" (Kubernetes names never contain one).
func Key(name, namespace string) string {
	return KeyPrefix + name + namespaceTag + namespace
}

// ParseKey returns the pod name and namespace of key. It rejects keys
// without KeyPrefix, keys of another shape, and empty names or namespaces.
// Errors wrap ErrInvalidKey and quote key.
func ParseKey(key string) (name, namespace string, err error) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w %q: want prefix %q", ErrInvalidKey, key, KeyPrefix)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[1] != "namespace" {
		return "", "", fmt.Errorf("%w %q: want %q", ErrInvalidKey, key, KeyPrefix+"<name>/namespace/<namespace>")
	}
	name, namespace = parts[0], parts[2]
	if name == "" {
		return "", "", fmt.Errorf("%w %q: empty pod name", ErrInvalidKey, key)
	}
	if namespace == "" {
		return "", "", fmt.Errorf("%w %q: empty namespace", ErrInvalidKey, key)
	}
	return name, namespace, nil
}

// NodeKeyPrefix is the prefix of the per-node layout of pod keys,
// relative to codec.KSRPrefix: a pod scheduled to node is stored at
// NodeKey(node, name, namespace), so that an agent lists and watches
// NodePrefix(its node) alone.
const NodeKeyPrefix = "k8s/node-pods/"

// NodePrefix is the prefix of the pods of node: NodeKeyPrefix + node +
// "/". The trailing "/" keeps node "a" from seeing the pods of node "ab".
func NodePrefix(node string) string {
	return NodeKeyPrefix + node + "/"
}

// NodeKey returns the per-node key of the pod name in namespace on node:
// NodePrefix(node) + name + "/namespace/" + namespace. Like Key, it does
// not validate its arguments; ParseNodeKey reverses it for every non-empty
// node, name and namespace without "/".
func NodeKey(node, name, namespace string) string {
	return NodePrefix(node) + name + namespaceTag + namespace
}

// ParseNodeKey returns the node, pod name and namespace of a per-node key.
// It rejects keys without NodeKeyPrefix, keys of another shape, and empty
// parts. Errors wrap ErrInvalidKey and quote key.
func ParseNodeKey(key string) (node, name, namespace string, err error) {
	rest, ok := strings.CutPrefix(key, NodeKeyPrefix)
	if !ok {
		return "", "", "", fmt.Errorf("%w %q: want prefix %q", ErrInvalidKey, key, NodeKeyPrefix)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[2] != "namespace" {
		return "", "", "", fmt.Errorf("%w %q: want %q", ErrInvalidKey, key, NodeKeyPrefix+"<node>/<name>/namespace/<namespace>")
	}
	for i, what := range []string{"node name", "pod name", "", "namespace"} {
		if what != "" && parts[i] == "" {
			return "", "", "", fmt.Errorf("%w %q: empty %s", ErrInvalidKey, key, what)
		}
	}
	return parts[0], parts[1], parts[3], nil
}

// ParseAnyKey returns the pod name and namespace of a key of either
// layout: Key's (node "") or NodeKey's.
func ParseAnyKey(key string) (node, name, namespace string, err error) {
	if strings.HasPrefix(key, NodeKeyPrefix) {
		return ParseNodeKey(key)
	}
	name, namespace, err = ParseKey(key)
	return "", name, namespace, err
}
