package namespace

import (
	"errors"

	"github.com/contiv-ipam/agent/plugins/ksr/model/internal/namekey"
)

// KeyPrefix is the prefix of every namespace key, relative to
// codec.KSRPrefix.
const KeyPrefix = "k8s/namespace/"

// Keyword names the resource of namespaces in the controller's Kubernetes
// state (the key of api.KubeStateData, KubeStateChange.Resource).
const Keyword = "namespace"

// ErrInvalidKey is wrapped by every ParseKey error.
var ErrInvalidKey = errors.New("invalid namespace key")

// Key returns the key of the namespace named name: KeyPrefix + name. It
// does not validate name; ParseKey(Key(name)) returns name for every
// non-empty name without "/" (Kubernetes namespace names never contain
// one).
func Key(name string) string {
	return KeyPrefix + name
}

// ParseKey returns the namespace name of key. It rejects keys without
// KeyPrefix, an empty name and a name with "/". Errors wrap ErrInvalidKey
// and quote key.
func ParseKey(key string) (name string, err error) {
	return namekey.Parse(key, KeyPrefix, "namespace", ErrInvalidKey)
}
