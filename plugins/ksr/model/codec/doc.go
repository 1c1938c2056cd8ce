// Package codec is the one encoding of the Kubernetes-state values (node,
// pod, vppnode, ...) in etcd and bolt: protojson keyed by the proto field
// names. Writers (contiv-ksr, nodesync, the bolt mirror) and readers (the
// controller's DB watcher) all go through it, so they agree byte for byte.
//
// Callers:
//
//  1. write values only with Marshal: keys are the proto field names
//     (pod_CIDR, ip_addresses, host_ip_address), zero-valued fields are
//     left out, and equal messages give equal bytes;
//  2. read values only with Unmarshal: it also accepts lowerCamelCase names
//     (podCIDR) and skips unknown fields, so values from other tools and
//     newer writers load; it replaces the message's contents;
//  3. join keys to KSRPrefix themselves: the model packages build keys
//     relative to it.
//
// Errors start with "codec:", name the message type and, when decoding,
// quote at most 64 bytes of the data.
package codec
