package node

import (
	"errors"

	"github.com/contiv-ipam/agent/plugins/ksr/model/internal/namekey"
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
	return namekey.Parse(key, KeyPrefix, "node", ErrInvalidKey)
}
