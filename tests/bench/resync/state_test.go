package resync

import (
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// The Kubernetes state of the benchmarks: 100,000 pods over 5,000 nodes,
// 250 of them on this node.
const (
	bigNodes     = 5000
	bigPods      = 100000
	bigLocalPods = 250
)

// thisNode is the agent's node name; it claims node ID 1 (the other
// nodes' vppnode records hold IDs 2..nodes).
const thisNode = "bench-node-0001"

// benchContivConf gives each of up to 16,384 node IDs a /23 pod subnet
// (509 pods), and the other subnets room for as many IDs, so that 1,000
// nodes fit: node ID 1 has pods in 10.128.2.0/23.
const benchContivConf = `ipamConfig:
  podSubnetCIDR: 10.128.0.0/9
  podSubnetOneNodePrefixLen: 23
  vppHostSubnetCIDR: 172.16.0.0/12
  vppHostSubnetOneNodePrefixLen: 24
  nodeInterconnectCIDR: 192.168.0.0/20
  vxlanCIDR: 192.168.32.0/20
  serviceCIDR: 10.96.0.0/12
`

// localNamespace holds this node's pods; the others are spread over
// otherNamespaces namespaces.
const (
	localNamespace  = "bench-local"
	otherNamespaces = 50
)

// shape is the size of a Kubernetes state and contiv-ksr's pod layout.
type shape struct {
	nodes, pods, local int
	layout             string // dbresources.PodLayoutNode or PodLayoutCluster
}

// The states: big in the per-node layout (contiv-ksr's default), the same
// in the cluster layout (Contiv's, every agent reads every pod), and a
// small cluster of 1,000 pods over 4 nodes with as many on this node.
var (
	big        = shape{nodes: bigNodes, pods: bigPods, local: bigLocalPods, layout: dbresources.PodLayoutNode}
	bigCluster = shape{nodes: bigNodes, pods: bigPods, local: bigLocalPods, layout: dbresources.PodLayoutCluster}
	small      = shape{nodes: 4, pods: 1000, local: bigLocalPods, layout: dbresources.PodLayoutNode}
)

// podKey is the key of the pod name in ns on the node with ID id, in the
// shape's layout.
func (s shape) podKey(id int, name, ns string) string {
	if s.layout == dbresources.PodLayoutCluster {
		return pod.Key(name, ns)
	}
	return pod.NodeKey(nodeName(id), name, ns)
}

// visible is the number of keys an agent of this node reads: every node
// record, and the pods of the cluster layout or its own.
func (s shape) visible() int {
	pods := s.local
	if s.layout == dbresources.PodLayoutCluster {
		pods = s.pods
	}
	return 2*s.nodes - 1 + pods
}

// nodeName is the name of the node with ID id (1 is this node).
func nodeName(id int) string { return fmt.Sprintf("bench-node-%04d", id) }

// nodeIP is the management (InternalIP) address of the node with ID id.
func nodeIP(id int) netip.Addr {
	return netip.AddrFrom4([4]byte{100, 64, byte(id >> 8), byte(id)})
}

// podIP is the k-th pod address of the node with ID id: host k+2 of its
// /23 in 10.128.0.0/9 (host 1 is the gateway).
func podIP(id, k int) netip.Addr {
	base := 0x0a800000 + uint32(id)<<9 + uint32(k) + 2
	return netip.AddrFrom4([4]byte{byte(base >> 24), byte(base >> 16), byte(base >> 8), byte(base)})
}

// localPodName is the name of this node's k-th pod.
func localPodName(k int) string { return fmt.Sprintf("local-%04d", k) }

// kv is one key (relative to codec.KSRPrefix) and its stored value.
type kv struct {
	key   string
	value []byte
}

// nodeKVs are the Kubernetes Node records of every node and the vppnode
// (node ID) records of the other nodes, as contiv-ksr and their agents
// write them.
func (s shape) nodeKVs() ([]kv, error) {
	out := make([]kv, 0, 2*s.nodes)
	for id := 1; id <= s.nodes; id++ {
		n := &node.Node{Name: nodeName(id), Provider_ID: "bench://" + nodeName(id), Addresses: []*node.NodeAddress{
			{Type: node.NodeAddress_NodeInternalIP, Address: nodeIP(id).String()},
			{Type: node.NodeAddress_NodeHostName, Address: nodeName(id)},
		}}
		v, err := codec.Marshal(n)
		if err != nil {
			return nil, err
		}
		out = append(out, kv{node.Key(n.Name), v})
		if id == 1 {
			continue // this node's ID is claimed by the agent
		}
		r := &vppnode.VppNode{Id: uint32(id), Name: nodeName(id)}
		if v, err = codec.Marshal(r); err != nil {
			return nil, err
		}
		out = append(out, kv{vppnode.Key(r.Id), v})
	}
	return out, nil
}

// podKVs are the Pod records: s.local pods on this node with the
// addresses of local (the agent's allocations, by pod name), and the
// other pods spread evenly over the other nodes with addresses in their
// pod subnets.
func (s shape) podKVs(local map[string]netip.Addr) ([]kv, error) {
	out := make([]kv, 0, s.pods)
	for k := 0; k < s.local; k++ {
		name := localPodName(k)
		a, ok := local[name]
		if !ok {
			return nil, fmt.Errorf("no allocation for local pod %s", name)
		}
		v, err := codec.Marshal(podModel(name, localNamespace, a, nodeIP(1)))
		if err != nil {
			return nil, err
		}
		out = append(out, kv{s.podKey(1, name, localNamespace), v})
	}
	others := s.pods - s.local
	for i := 0; i < others; i++ {
		id := 2 + i%(s.nodes-1)
		k := i / (s.nodes - 1)
		name := fmt.Sprintf("pod-%06d", i)
		ns := fmt.Sprintf("ns-%02d", i%otherNamespaces)
		v, err := codec.Marshal(podModel(name, ns, podIP(id, k), nodeIP(id)))
		if err != nil {
			return nil, err
		}
		out = append(out, kv{s.podKey(id, name, ns), v})
	}
	return out, nil
}

// podModel is a pod as contiv-ksr mirrors a typical Deployment's pod: two
// labels (map and list forms) and one container with one port.
func podModel(name, ns string, ip, host netip.Addr) *pod.Pod {
	labels := map[string]string{"app": "bench-" + ns, "pod-template-hash": "5d8f7c9b6"}
	return &pod.Pod{
		Name: name, Namespace: ns, IpAddress: ip.String(), HostIpAddress: host.String(),
		Labels: labels,
		Label:  []*pod.Pod_Label{{Key: "app", Value: labels["app"]}, {Key: "pod-template-hash", Value: labels["pod-template-hash"]}},
		Container: []*pod.Pod_Container{{Name: "app", Port: []*pod.Pod_Container_Port{
			{Name: "http", ContainerPort: 8080, Protocol: pod.Pod_Container_Port_TCP},
		}}},
	}
}
