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
