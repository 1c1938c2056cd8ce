// Package checkpoint is the file format of an IPAM checkpoint: every
// allocation of one node, in a plain, versioned JSON document that an
// operator can keep, read, and restore on the same node or another one.
// It is the codec (Encode, Decode, and DecodeAWS for the checkpoint of
// the AWS VPC CNI): pure, no I/O, no clock, and it imports nothing of
// this repository; and the Checkpointer interface with its two backings,
// JSONFile (checkpointer.go: the one piece that does I/O, an atomic
// replace of one file) and Memory. Nothing but a Checkpointer is shared
// or mutable; every function is safe for concurrent use.
//
// # Who calls what
//
//  1. Export: plugins/ipam's Plugin.ExportCheckpoint takes the Data of the
//     node (durable state, nothing in flight); GET
//     /contiv/v1/ipam/checkpoint (plugins/ipam/rest_checkpoint.go) writes
//     it with Encode; `contiv-netctl ipam checkpoint export` saves the
//     bytes after checking that they Decode.
//  2. Import: `contiv-netctl ipam checkpoint import` Decodes the file
//     first, so that a bad or newer file is refused before anything is
//     sent, then POSTs the file as it is to /contiv/v1/ipam/checkpoint,
//     which Decodes it again (the server trusts no client) and hands the
//     Data to Plugin.ImportCheckpoint.
//
// Encode refuses what Decode would refuse, so a document this code
// writes is one it reads back, to the same Data.
//
// # The format, version "contiv-ipam/2" (Version)
//
//	{
//	  "version": "contiv-ipam/2",
//	  "node": "worker-1",
//	  "takenAt": "2026-11-25T14:50:00Z",
//	  "allocations": [
//	    {"network": "k8s-pod-network", "containerId": "c1", "ifName": "eth0",
//	     "pod": {"name": "web-0", "namespace": "default"},
//	     "ips": ["10.1.1.2", "fd00:10:1:1::2"], "pools": ["10.1.1.0/24", "fd00:10:1:1::/64"],
//	     "allocatedAt": "2026-11-25T14:00:00Z", "metadata": {"team": "web"}},
//	    {"pod": {"name": "db-0", "namespace": "default"}, "ips": ["10.1.1.3"]},
//	    {"owner": "router", "seq": 3, "ips": ["10.1.1.4"],
//	     "reservation": {"id": "2764c618-985a-4630-b538-08b8f79a4334", "deadline": "2026-11-25T15:00:00Z"}}
//	  ]
//	}
//
// "version" and "allocations" (an array, empty when the node holds
// nothing) are required; "node" and "takenAt" are for the operator. Each
// entry is one allocation (Entry): its key, its addresses, the pools they
// came from, when it was made, its reservation while unconfirmed, and
// free-form metadata. Encode writes the entries sorted by their first
// address, two-space indented, every time in UTC (RFC 3339), addresses
// and prefixes in canonical form, optional fields omitted when empty.
//
// # Version "contiv-ipam/1" (VersionV1)
//
// The form a single-stack agent wrote before owners, pools and
// reservations existed: one address per entry, in "ip".
//
//	{"version": "contiv-ipam/1", "node": "worker-1", "takenAt": "...",
//	 "allocations": [
//	   {"network": "k8s-pod-network", "containerId": "c1", "ifName": "eth0",
//	    "pod": {"name": "web-0", "namespace": "default"}, "ip": "10.1.1.2",
//	    "allocatedAt": "...", "metadata": {...}},
//	   {"pod": {"name": "db-0", "namespace": "default"}, "ip": "10.1.1.3"}]}
//
// Every entry names its pod ("pod" required; with "network",
// "containerId" and "ifName" it is an attachment, without them pod-keyed)
// and has "ip"; "allocatedAt" and "metadata" are optional; "ips",
// "pools", "owner", "seq" and "reservation" are unknown fields there.
// Migration: "ip" becomes ips[0], everything else is kept as it is; the
// result is validated as a "contiv-ipam/2" entry, and an error about the
// address names the field "ip". testdata/v1.json is such a document.
//
// # Decoding, in order
//
//  1. The document is one JSON object, nothing after it.
//  2. Its "version" is read first: "contiv-ipam/2" is read as it is,
//     "contiv-ipam/1" migrated, "contiv-ipam/N" with N above 2 refused
//     with ErrNewerVersion (naming N and the newest version this code
//     reads); a missing version, or any other ("vpc-cni-ipam/1", "2",
//     garbage), is ErrInvalid naming the value.
//  3. Every object is read strictly: key names exact (case included),
//     each key once, no unknown key, every value of its type (null is
//     none: an absent field is left out), and every time RFC 3339 with a
//     year from 0 to 9999 in UTC.
//  4. Every entry is validated (below).
//
// Every refusal but ErrNewerVersion wraps ErrInvalid and names where:
// the entry's index (allocations[3]), the field (`"ips[1]"`) and the
// value, quoted (cut to 80 bytes).
//
// # Validation rules of an entry
//
//   - Exactly one kind of key: an attachment ("network", "containerId",
//     "ifName", all non-empty, and "pod"), a pod-keyed allocation ("pod"
//     alone), or an owner's ("owner" non-empty and "seq" above 0, no pod,
//     no attachment). A "pod" has a non-empty "name" and "namespace".
//   - "ips": 1 or 2 addresses, each parsed by net/netip, without a zone,
//     not IPv4-mapped; two are of different families.
//   - "pools": none, or one per address in the order of "ips", each a
//     prefix without host bits that contains its address.
//   - "reservation": a non-empty "id" and a non-zero "deadline".
//   - Across entries: no two have the same key (of one kind), no address
//     is in two.
//
// # The AWS VPC CNI's checkpoint (DecodeAWS)
//
// ipamd keeps its allocations in /var/run/aws-node/ipam.json, version
// "vpc-cni-ipam/1" (AWSVersion): {"version", "allocations": [{"networkName",
// "containerID", "ifName", "ipv4" or "ipv6", "allocationTimestamp" (ns
// since 1970), "metadata": {"k8sPodNamespace", "k8sPodName",
// "interfacesCount"}}]}. DecodeAWS reads it as strictly as Decode reads
// ours and converts each entry to an attachment with its pod, so that
// `contiv-netctl ipam checkpoint import -from aws-vpc-cni` can restore a
// node's pods' addresses on a node moving from the AWS VPC CNI. Decode
// refuses such a file (its version is not ours).
//
// What the node does with a valid document (entries outside its pod
// subnets, a node that holds allocations already) is plugins/ipam's
// business (ImportCheckpoint), not the codec's.
package checkpoint
