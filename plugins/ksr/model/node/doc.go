// Package node is the Kubernetes Node model that contiv-ksr mirrors into
// etcd and the agents read: the Node message generated from node.proto
// (run `make generate` after editing it), the key builder and parser, and
// Keyword, the resource's name in the controller's Kubernetes state.
//
// A node named n is stored at codec.KSRPrefix + Key(n). Callers:
//
//  1. build keys only with Key and read them only with ParseKey, which
//     rejects keys of other resources, empty names and names with "/";
//  2. encode and decode values only with package codec, so that every
//     writer and reader agrees on the JSON field names (pod_CIDR,
//     pod_CIDRs, provider_ID, node_info, ...);
//  3. treat a decoded Node as read-only once it is shared: the controller
//     hands the same message to every event handler.
//
// protoc-gen-go keeps the underscore before a capital letter in Go names,
// so the fields are Pod_CIDR, Pod_CIDRs, Provider_ID, Machine_ID,
// System_UUID and Boot_ID (getters GetPod_CIDR and so on).
//
// pod_CIDR is spec.podCIDR and pod_CIDRs spec.podCIDRs (every address
// family, in order; Kubernetes keeps its first equal to spec.podCIDR).
// Records of older writers have pod_CIDR alone: read it as the only one.
package node
