// Package nodesync gives every node of the cluster a unique node ID and
// keeps a registry of the nodes: their IDs and VPP addresses (vppnode
// records under allocatedIDs/) and their management addresses and pod
// CIDRs (Kubernetes node records under k8s/node/), both read from the
// Kubernetes state the controller hands to its event handlers.
//
// # Node ID claim
//
// The ID of the node named n (this agent's label) is held by the etcd key
// /vnf-agent/contiv-ksr/allocatedIDs/<id> whose VppNode value names n. The
// claim runs in Resync, the first time and in every later resync for as
// long as the node has no ID:
//
//  1. List allocatedIDs/ in etcd itself: the kube state of the resync may be
//     stale (the bolt mirror, a cut-off watch). Keys that are not valid node
//     ID keys are skipped with a warning; a value that does not decode still
//     marks its ID as taken.
//  2. If records name n, n keeps the smallest of their IDs (an agent that
//     restarts keeps its ID); the other records are logged and left alone.
//  3. Otherwise take the free IDs of that listing in increasing order (the
//     gaps from 1, then above the highest) and create each candidate's key
//     with a transaction: if the key is absent, put VppNode{id, n}. The first
//     transaction that succeeds wins. A lost transaction means another agent
//     took that ID after the listing; the next free candidate of the same
//     listing is tried at once. After five lost transactions in a row the
//     claim waits a short jittered pause (at most 16ms) and lists again.
//  4. Every transaction counts as an attempt; after the attempt bound
//     (DefaultMaxClaimAttempts, see UseMaxClaimAttempts) the claim fails with
//     an error wrapping ErrClaimGaveUp that names the node, the attempts and
//     the last candidate. A lost transaction only happens when another
//     writer created that key during this claim, so losing 100 times takes
//     more than 100 nodes claiming IDs at the same moment.
//
// Claim errors (no DB: ErrNoDatabase; etcd unreachable; gave up) are
// returned from Resync wrapped in api.FatalError: the agent must not run
// without an ID. A transaction whose outcome is unknown (it timed out) is
// an error too; if it did commit, the next claim finds the record by name
// in step 2. The agent never deletes an ID key: only an operator frees an
// ID.
//
// # Caller duties
//
//  1. Wire ServiceLabel (this node's name), DB (the etcd plugin) and
//     EventLoop (the controller), and register the plugin as an event
//     handler after contivconf and before every handler that uses node IDs
//     (ipam): they read GetNodeID in their own Resync.
//  2. Call GetNodeID, GetAllNodes and PublishNodeIPs from any goroutine
//     once Init returned; GetNodeID is 0 until a resync claimed the ID.
//  3. Handle NodeUpdate events: the plugin pushes them as follow-ups from
//     its Update when another node joins (PrevState nil), leaves (NewState
//     nil) or changes its VPP addresses (vppnode records), and when a node
//     that has an ID, this node included, changes its management addresses
//     or its pod CIDR (Kubernetes node records). PrevState and NewState are
//     copies.
//  4. Call PublishNodeIPs with this node's VPP addresses of one IP version;
//     it writes this node's vppnode record only when the set of addresses
//     changed and returns the write's error.
//
// # Events
//
// HandlesEvent is true for every resync and for Kubernetes state changes of
// resource "node" (every node) and "vppnode" (every key but this node's
// own: the plugin wrote it). Values that are not of the expected type or do
// not parse are logged and skipped, never an error. Resync rebuilds the
// registry from the resync's kube state and pushes no event. Revert and
// Close do nothing.
package nodesync
