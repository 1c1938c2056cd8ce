// Package vppnode is the node-ID claim that nodesync writes to etcd: the
// VppNode message generated from vppnode.proto (run `make generate` after
// editing it), the key builder and parser, and Keyword, the resource's
// name in the controller's Kubernetes state. It lives beside node and pod
// so that the controller's registry (dbresources) imports models only,
// never a handler's package; the proto package stays nodesync.vppnode.
//
// The node holding ID id is recorded at codec.KSRPrefix + Key(id), that is
// ".../allocatedIDs/<id>", with a VppNode value naming the node and its
// interconnect addresses. Callers:
//
//  1. build keys only with Key and read them only with ParseKey, which
//     accepts only the form Key writes (decimal, 1 and up, no leading zero);
//  2. encode and decode values only with package codec, so that every
//     writer and reader agrees on the JSON field names (ip_addresses, ...);
//  3. read both address fields: ip_address is the obsolete single-address
//     form that older writers set, ip_addresses ("ip/prefix" each) is the
//     current one, which new values set.
//
// Go names follow protoc-gen-go: Id, IpAddress, IpAddresses.
package vppnode
