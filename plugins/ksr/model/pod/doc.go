// Package pod is the Kubernetes Pod model that contiv-ksr mirrors into etcd
// and the agents read: the Pod message generated from pod.proto (run
// `make generate` after editing it), the key builder and parser, and
// Keyword, the resource's name in the controller's Kubernetes state.
//
// A pod name in namespace ns running on node is stored at codec.KSRPrefix +
// NodeKey(node, name, ns), ".../k8s/node-pods/<node>/<name>/namespace/<ns>"
// (the per-node layout, contiv-ksr's default: an agent lists and watches
// NodePrefix(its node)), or at codec.KSRPrefix + Key(name, ns),
// ".../k8s/pod/<name>/namespace/<ns>" (Contiv's cluster layout). Callers:
//
//  1. build keys only with Key and NodeKey and read them only with
//     ParseKey, ParseNodeKey or ParseAnyKey, which reject keys of other
//     resources and of any other shape;
//  2. encode and decode values only with package codec, so that every
//     writer and reader agrees on the JSON field names (ip_address,
//     ip_addresses, host_ip_address, ...);
//  3. treat a decoded Pod as read-only once it is shared: the controller
//     hands the same message to every event handler.
//
// Labels come in two forms: the list label (field 3, older writers) and the
// map labels (field 7). Readers that need labels should look at both.
//
// Addresses too: ip_address (field 4) is status.podIP, ip_addresses
// (field 9; 7 is the labels map) status.podIPs, every address family in
// order with ip_address first. Records of older writers have ip_address
// alone: read it as the only one.
package pod
