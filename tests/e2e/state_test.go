package e2e

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/namespace"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// state is the mirrored part of the Kubernetes state: each key (relative
// to codec.KSRPrefix) with its key field: a pod's ip_address, a node's
// pod_CIDR, "" for a namespace.
type state map[string]string

// mirrored reads the state contiv-ksr wrote to etcd.
func mirrored(ctx context.Context, cli *clientv3.Client) (state, error) {
	resp, err := cli.Get(ctx, codec.KSRPrefix+"k8s/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := state{}
	for _, kv := range resp.Kvs {
		key := strings.TrimPrefix(string(kv.Key), codec.KSRPrefix)
		field, mirroredKey, err := keyField(key, kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if mirroredKey {
			out[key] = field
		}
	}
	return out, nil
}

// keyField decodes the key field of one value; mirroredKey is false for
// keys of other resources.
func keyField(key string, value []byte) (field string, mirroredKey bool, err error) {
	switch {
	case strings.HasPrefix(key, pod.KeyPrefix), strings.HasPrefix(key, pod.NodeKeyPrefix):
		var p pod.Pod
		err := codec.Unmarshal(value, &p)
		return p.GetIpAddress(), true, err
	case strings.HasPrefix(key, node.KeyPrefix):
		var n node.Node
		err := codec.Unmarshal(value, &n)
		return n.GetPod_CIDR(), true, err
	case strings.HasPrefix(key, namespace.KeyPrefix):
		return "", true, nil
	}
	return "", false, nil
}

// inAPI reads the same state from the API server.
func inAPI(ctx context.Context, client kubernetes.Interface) (state, error) {
	out := state{}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		out[node.Key(n.Name)] = n.Spec.PodCIDR
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" { // contiv-ksr's per-node layout: scheduled pods alone
			out[pod.NodeKey(p.Spec.NodeName, p.Name, p.Namespace)] = p.Status.PodIP
		}
	}
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, n := range nss.Items {
		out[namespace.Key(n.Name)] = ""
	}
	return out, nil
}

// idRecord returns the create revision of allocatedIDs/<id> and the node
// it names; revision 0 when the key is absent.
func idRecord(ctx context.Context, cli *clientv3.Client, id uint32) (int64, string, error) {
	resp, err := cli.Get(ctx, codec.KSRPrefix+vppnode.Key(id))
	if err != nil || len(resp.Kvs) == 0 {
		return 0, "", err
	}
	var rec vppnode.VppNode
	if err := codec.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return 0, "", err
	}
	return resp.Kvs[0].CreateRevision, rec.GetName(), nil
}

// allocatedIDs lists allocatedIDs/: node ID -> the node it names.
func allocatedIDs(ctx context.Context, cli *clientv3.Client) (map[uint32]string, error) {
	resp, err := cli.Get(ctx, codec.KSRPrefix+vppnode.KeyPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[uint32]string{}
	for _, kv := range resp.Kvs {
		id, err := vppnode.ParseKey(strings.TrimPrefix(string(kv.Key), codec.KSRPrefix))
		if err != nil {
			return nil, err
		}
		var rec vppnode.VppNode
		if err := codec.Unmarshal(kv.Value, &rec); err != nil {
			return nil, err
		}
		out[id] = rec.GetName()
	}
	return out, nil
}
