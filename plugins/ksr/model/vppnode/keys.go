package vppnode

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// KeyPrefix is the prefix of every node-ID key, relative to codec.KSRPrefix.
const KeyPrefix = "allocatedIDs/"

// PresencePrefix is the full etcd prefix of the agents' presence keys:
// PresencePrefix + <node name> exists, bound to the agent's lease, while
// an agent serves that node (nodesync writes it). contiv-ksr frees a node
// ID only while its node's presence key is absent.
const PresencePrefix = "/vnf-agent/contiv-nodesync/presence/"

// PresenceKey is the presence key of the node named name.
func PresenceKey(name string) string { return PresencePrefix + name }

// Keyword names the resource of node-ID claims in the controller's Kubernetes
// state (the key of api.KubeStateData, KubeStateChange.Resource).
const Keyword = "vppnode"

// ErrInvalidKey is wrapped by every ParseKey error.
var ErrInvalidKey = errors.New("invalid node ID key")

// Key returns the key of node ID id: KeyPrefix + id in decimal. ID 0 is not
// a valid node ID; Key(0) yields a key that ParseKey rejects.
func Key(id uint32) string {
	return KeyPrefix + strconv.FormatUint(uint64(id), 10)
}

// ParseKey returns the node ID of key. The ID must be written as Key writes
// it: decimal, from 1 to 4294967295, no sign, no leading zeros, so that
// Key(id) == key whenever ParseKey succeeds. Errors wrap ErrInvalidKey and
// quote key.
func ParseKey(key string) (uint32, error) {
	s, ok := strings.CutPrefix(key, KeyPrefix)
	switch {
	case !ok:
		return 0, fmt.Errorf("%w %q: want prefix %q", ErrInvalidKey, key, KeyPrefix)
	case s == "0":
		return 0, fmt.Errorf("%w %q: node ID 0 is not valid (IDs start at 1)", ErrInvalidKey, key)
	case strings.HasPrefix(s, "0"):
		return 0, fmt.Errorf("%w %q: node ID has a leading zero", ErrInvalidKey, key)
	}
	id, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w %q: want a decimal node ID from 1 to %d", ErrInvalidKey, key, uint32(1<<32-1))
	}
	return uint32(id), nil
}
