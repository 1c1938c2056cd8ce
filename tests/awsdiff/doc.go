// Package awsdiff runs the same sequences of calls through the AWS-style
// pools of plugins/ipam (its keeper: AddEmptyPool, AddPoolAddress,
// DelPoolAddress, RemovePool, RemoveUnusedPool, allocations and releases
// by CNI key, the address cooldown, FreeableIPs, AllocatedIPs, Stats,
// ExportCheckpoint and ImportCheckpoint) and through the AWS VPC CNI's
// own datastore (github.com/aws/amazon-vpc-cni-k8s v1.23.2,
// pkg/ipamd/datastore), and checks that both give every call the same
// outcome and error class and hold the same after every call: the same
// ENIs (pools), the same addresses on each, the same allocations, the
// same counts. It is a module of its own so that the main module does
// not depend on the AWS VPC CNI.
//
// # What runs on the AWS side
//
// The datastore's code is imported and called, not copied: NewDataStore
// in secondary-IP mode (every address a /32 of its ENI) with an
// in-memory datastore.TestCheckpoint (or its JSONFile), AddENI,
// AddIPv4CidrToStore, DelIPv4CidrFromStore, RemoveENIFromDataStore,
// RemoveUnusedENIFromStore, AssignPodIPv4Address, UnassignPodIPAddress,
// FreeableIPs, AllocatedIPs, GetENICIDRs, GetIPStats, ReadBackingStore.
// What its API does not let a test control, the rig (rig_aws_test.go)
// reaches through the unexported fields of the datastore (reflect and
// unsafe), changing times and its netlink, never which ENIs, addresses
// and allocations it holds:
//
//   - Its clock: it reads time.Now() for the cooldown (an address's
//     UnassignedTime) and the minimum life of an ENI (createTime); the
//     rig moves both back when the sequences advance our fake clock.
//   - Its choice: AssignPodIPv4Address takes the first free address in
//     Go map order. For each assign the rig leaves it only the address
//     ours handed out: for that call the others are marked as cooling
//     down (an address never used gets a cooling entry, deleted after),
//     and it checks beforehand that the datastore could hand it out.
//   - Its host: ReadBackingStore keeps an allocation only when its pod's
//     host veth exists (netlink LinkList) and deletes the IP rules of the
//     others; its netlink is a fake that lists the veths the test says
//     and counts the rule deletes, so the machine is never touched.
//
// # Our side
//
// A keeper (plugins/ipam/keeper) on node 1 with a fake clock, in memory
// or on a bolt file; the node's own pod subnet (10.0.0.8/29) is excluded,
// so that every address comes from the pools the sequences add, as every
// address of the datastore comes from an ENI. AWS ENI eni-i is our pool
// 10.0.1i.0/29, added empty (AddEmptyPool), and its addresses one by one.
//
// # What is compared
//
// TestRandomSequencesAgree runs random sequences (-args -seqs N -steps M)
// of: add or remove an ENI (with force or not), add or delete an address
// (of the ENI's window; sometimes one ours never hands out, or one of
// another ENI), assign and release by CNI key (eth0 and eth1 of eight
// containers), advance the clocks by 10, 20 or 30 s, FreeableIPs,
// remove-unused with warm and minimum targets, and, on bolt, a restart of
// ours. Every third sequence ends with a checkpoint and restore of both
// sides (the datastore's document must read with checkpoint.DecodeAWS as
// ours; the restore drops one pod's veth in half of them) and goes on.
// After every call the state is compared (pair.check). The differences
// that remain are the table of differences_test.go, with their reasons; a
// difference not in it fails at once, one of it no sequence met fails at
// the end.
//
// TestAWSCheckpointFixture has the datastore's JSONFile write the
// checkpoint file that contiv-netctl's tests import
// (cmd/contiv-netctl/testdata/aws-vpc-cni-ipam.json; -args -update
// rewrites it) and checks the committed copy: DecodeAWS reads the same
// pods, it is byte for byte what the datastore writes for its data, and
// the datastore restores it. TestCheckpointersAgree compares the two
// JSON-file checkpointers.
package awsdiff
