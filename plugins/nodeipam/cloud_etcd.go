package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// EtcdCloud is a Cloud kept in etcd, for operators whose source of truth
// for the nodes' ranges is outside Kubernetes (an inventory, a script, a
// provisioning tool) and who write it into etcd.
//
// Key layout: one key per node, <Prefix><node> where <node> is the node
// name escaped with url.PathEscape (Config.CloudPrefix,
// "/contiv-ksr/nodeipam/cloud/" by default, so node "worker-1" is
// "/contiv-ksr/nodeipam/cloud/worker-1"). The value is JSON:
//
//	{"ranges":["10.1.2.0/24","fd00:1::/64"]}
//
// one CIDR per family, the primary one first. A node without a key (or
// with an empty list) has no ranges; SetNodeRanges with no ranges deletes
// the key. A value that does not decode, or holds a string that is not a
// CIDR, fails the read with an error naming the key and the value.
type EtcdCloud struct {
	// DB is the store (the root broker: Prefix is a full key prefix).
	DB kvdb.Broker
	// Prefix is prepended to every node's key; it ends with "/".
	Prefix string
	// Fence returns the compares every write carries (contiv-ksr: the
	// leadership's fence, so a replica that lost the lead writes nothing);
	// nil writes unfenced. A refused write wraps ErrLostLead.
	Fence func() []kvdb.Cmp
}

var _ Cloud = (*EtcdCloud)(nil)

// cloudValue is the JSON value of a node's key.
type cloudValue struct {
	Ranges []string `json:"ranges"`
}

// NodeRanges implements Cloud.
func (e *EtcdCloud) NodeRanges(ctx context.Context, node string) ([]netip.Prefix, error) {
	key := e.key(node)
	kv, found, err := e.DB.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read the ranges of node %s: %w", node, err)
	}
	if !found {
		return []netip.Prefix{}, nil
	}
	return decodeCloudValue(key, kv.Value)
}

// SetNodeRanges implements Cloud.
func (e *EtcdCloud) SetNodeRanges(ctx context.Context, node string, ranges []netip.Prefix) error {
	key := e.key(node)
	if len(ranges) == 0 {
		return fencedWrite(ctx, e.DB, e.Fence, kvdb.DeleteOp(key), "delete the ranges of node %s", node)
	}
	value, err := json.Marshal(cloudValue{Ranges: cidrStrings(ranges)})
	if err != nil {
		return fmt.Errorf("encode the ranges %v of node %s: %w", ranges, node, err)
	}
	return fencedWrite(ctx, e.DB, e.Fence, kvdb.PutOp(key, value), "write the ranges %v of node %s", ranges, node)
}

// key is the node's key.
func (e *EtcdCloud) key(node string) string { return e.Prefix + url.PathEscape(node) }

// decodeCloudValue parses the value of key.
func decodeCloudValue(key string, value []byte) ([]netip.Prefix, error) {
	var v cloudValue
	if err := json.Unmarshal(value, &v); err != nil {
		return nil, fmt.Errorf("cloud key %s: value %q is not {\"ranges\":[CIDR...]}: %w", key, value, err)
	}
	ranges, err := parseCIDRs(v.Ranges)
	if err != nil {
		return nil, fmt.Errorf("cloud key %s: value %q: %w", key, value, err)
	}
	return ranges, nil
}
