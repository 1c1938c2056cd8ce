// Package dbresources is the registry of the Kubernetes-state resources
// the controller's DB watcher lists and watches under codec.KSRPrefix:
// each resource's keyword (the key of api.KubeStateData), its key prefix
// and the message its values decode into.
//
// vppnode, node, pod and namespace decode into our models (vppnode.VppNode,
// node.Node, pod.Pod, namespace.Namespace, all under plugins/ksr/model), and
// their keywords are the models' Keyword constants; every other resource
// (nodeconfig,
// policy, service, ...) decodes into a *structpb.Struct, so its values are
// still carried and compared even though nothing of ours reads them.
//
// Callers:
//
//  1. strip codec.KSRPrefix from etcd and bolt keys before calling ByKey or
//     Decode: keys here are relative to it;
//  2. decode values only with Decode, which picks the resource by the
//     longest matching prefix and decodes with codec.Unmarshal; skip (or
//     report) keys for which ByKey says false;
//  3. rely on the order of All and Keywords (fixed: vppnode, node, pod,
//     then the rest), not on changing it: All returns a copy, so editing it
//     changes nothing.
//
// Adding a resource means one line in the registry; a test checks that
// keywords and prefixes are unique and every prefix ends with "/".
package dbresources
