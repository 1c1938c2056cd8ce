// Package namespace is the Kubernetes Namespace model that contiv-ksr
// mirrors into etcd: the Namespace message generated from namespace.proto
// (run `make generate` after editing it), the key builder and parser, and
// Keyword, the resource's name in the controller's Kubernetes state.
//
// A namespace named n is stored at codec.KSRPrefix + Key(n). Callers:
//
//  1. build keys only with Key and read them only with ParseKey, which
//     rejects keys of other resources, empty names and names with "/";
//  2. encode and decode values only with package codec;
//  3. treat a decoded Namespace as read-only once it is shared.
//
// Labels come in two forms, as in the pod model: the list label (field 2,
// what Contiv's tools read) and the map labels (field 3).
package namespace
