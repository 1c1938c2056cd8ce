package node

import (
	"errors"
	"fmt"
	"strings"
)

// KeyPrefix is the prefix of every node key, relative to codec.KSRPrefix.
const KeyPrefix = "k8s/node/"

// Keyword names the resource of nodes in the controller's Kubernetes
// state (the key of api.KubeStateData, KubeStateChange.Resource).
const Keyword = "node"

// ErrInvalidKey is wrapped by every ParseKey error.
var ErrInvalidKey = errors.New("invalid node key")

// Key returns the key of the node named name: KeyPrefix + name. It does not
// validate name; ParseKey(Key(name)) returns name for every non-empty name
// without "/" (Kubernetes node names never contain one).
func Key(name string) string {
	return KeyPrefix + name
}

// ParseKey returns the node name of key. It rejects keys without KeyPrefix,
// an empty name and a name with "/". Errors wrap ErrInvalidKey and quote key.
func ParseKey(key string) (name string, err error) {
	name, ok := strings.CutPrefix(key, KeyPrefix)
	switch {
	case !ok:
		return "", fmt.Errorf("%w %q: want prefix %q", ErrInvalidKey, key, KeyPrefix)
	case name == "":
		return "", fmt.Errorf("%w %q: empty node name", ErrInvalidKey, key)
	case strings.Contains(name, "/"):
		return "", fmt.Errorf("%w %q: node name contains \"/\"", ErrInvalidKey, key)
	}
	return name, nil
}
