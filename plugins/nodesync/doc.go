// Package nodesync gives every node of the cluster a unique node ID, keeps
// that ID unique for as long as the agent runs, and keeps a registry of the
// nodes: their IDs and VPP addresses (vppnode records under allocatedIDs/)
// and their management addresses and pod CIDRs (Kubernetes node records
// under k8s/node/), both read from the Kubernetes state the controller
// hands to its event handlers.
//
// The invariant: a node ID is never held by two nodes. The ID of the node
// named n (this agent's label) is held by the etcd key
// /vnf-agent/contiv-ksr/allocatedIDs/<id> whose VppNode value names n, and
// n is served by one live agent at a time.
//
// # Presence: one live agent per node name
//
// Before it claims or re-asserts anything the agent holds the presence key
// PresencePrefix+n (outside the KSR prefix, so the controller does not see
// it): a key bound to an etcd lease of -nodesync-presence-ttl (default
// 15s) that the etcd plugin keeps alive, valued with the holder (host, pid,
// start time and, with LocalDB, the instance of its bolt file; see Holder).
// It is created if absent (compare: absent) or taken over if it still
// holds this process's value (this agent's own key after a keep-alive
// gap). Held by another value, the agent waits at most that holder's
// remaining TTL plus 2s: a killed agent's key expires by then and the
// claim goes on; a live agent keeps it, and the claim fails with
// ErrNodeNameTaken naming n and the holder. Close revokes the lease, so a
// clean restart does not wait.
//
// A restart after a kill (SIGKILL, OOM) does not wait either when the
// agent restarts on the same bolt file. The instance is a random ID stored
// once in LocalDB (InstanceKey, beside NodeIDKey), durably, before any
// presence value carries it. The bolt plugin holds an exclusive lock on
// its file while the agent runs, so no other live process can hold the
// same file: a presence key valued with this process's instance (and not
// with its own value) was written by an earlier agent on this file, which
// is dead. The first presence claim of the process replaces that key at
// once, with a transaction on the revision it read (TakeOverPresence), so
// a key written since (another agent, a late write) is never overwritten,
// and logs the take-over at info level with the old value. This happens
// once per process, only in its first claim: afterwards no earlier agent
// can write, and a value carrying this instance is waited for like any
// other (a late write of a killed agent expires; a copy of this bolt file
// running elsewhere keeps its lease and is refused). A value without an
// instance (an agent that predates instances, or one without LocalDB), of
// another instance, or that does not decode, is waited for as above.
// Without LocalDB, or when it fails, the value has no instance and a
// restart waits for the killed agent's key (at most one TTL).
//
// A keeper goroutine (AfterInit to Close) watches the lease and, when it
// is lost, pushes a NodeIDCheck event.
//
// # Node ID claim
//
// The claim runs in the first resync that reaches etcd, and in every later
// one for as long as the node has no ID:
//
//  1. Hold the presence (above); before the first claim of the process,
//     read the instance from LocalDB (InstanceKey), or store a new one.
//  2. Read the ID this node last ran with from LocalDB (NodeIDKey).
//  3. Find n's record in etcd itself (the kube state of the resync may be
//     stale: the bolt mirror, a cut-off watch), listing only as a
//     fallback: (a) the record of the stored ID, one read; (b) else the
//     index key IndexPrefix+n (outside the KSR prefix, valued with an ID
//     in decimal, written in the transaction that creates the record) and
//     the record it points at, two reads; each counts only when the
//     record names n (the index is a hint: contiv-ksr frees an ID by
//     deleting its record and leaves the index stale); (c) else list
//     allocatedIDs/ (records of agents that predate the index have none):
//     the IDs come from the keys, keys that are not valid node ID keys are
//     skipped with a warning, a value is decoded only when it may name n
//     (it contains n's bytes or any backslash, an escape), and a value
//     that does not decode still marks its ID as taken. A restart finds
//     its record by (a) or (b); a new node lists once.
//  4. If the record is found, n keeps that ID (by (c), the smallest of the
//     IDs whose records name n, the others logged and left alone, and the
//     index is written, best effort).
//  5. Otherwise try the stored ID first when it is free, then candidates
//     among the window smallest free IDs of the listing's view, creating
//     each candidate's key with a transaction: if the key is absent, put
//     VppNode{id, n} and IndexPrefix+n = id. The first transaction that
//     succeeds wins; the compare-and-swap is the only arbiter. A lost
//     transaction means another agent took that ID after the listing: the
//     ID is marked taken in the view, nothing is listed, and the next
//     candidate is picked in the window. The pick is a sequence seeded by
//     a hash of n (the same for every claim of n, different for other
//     names), so nodes with the same view spread over it. The window
//     starts at the activity, 1 in a quiet store (a node alone takes the
//     smallest free ID), else half the store revisions committed between
//     the index read and the listing, one round trip: about the number of
//     agents writing with it (each writes its presence and its record);
//     so a herd that starts together, whose members do not see each
//     other's records, spreads at once instead of all going for the same
//     ID. It doubles with every loss, up to max(32, 2 × (IDs the view
//     knows taken + activity)) and never above MaxClaimWindow (4096). The
//     claim lists again only after 8 losses since its last listing (its
//     view is stale), or when a loss leaves no free ID up to the bound in
//     the view.
//  6. Every transaction counts as an attempt; after the attempt bound
//     (DefaultMaxClaimAttempts, see UseMaxClaimAttempts) the claim fails with
//     an error wrapping ErrClaimGaveUp that names the node, the attempts and
//     the last candidate. A herd converges in far fewer (see
//     tests/bench/nodeids). Compactness: a candidate is among the window
//     smallest IDs not known taken, so a claimed ID is at most K + window
//     for the K IDs its view knows taken, and at most K + 32 + 2K when the
//     activity is 0; without a loss in a quiet store it is the smallest
//     free ID. No candidate is ever above Deps.MaxNodeID (the agent gives
//     ipam.MaxNodeID of its ipamConfig: the largest ID its node subnets
//     can serve; without it, math.MaxUint32): when a fresh listing shows
//     every ID up to it taken the claim fails, naming it, and is retried
//     like an etcd failure (contiv-ksr frees the IDs of deleted Nodes).
//  7. Compare the ID with the stored one: nothing stored, it is stored; the
//     same, fine; different (or unreadable), the change is logged at error
//     level, counted (contiv_nodesync_node_id_changes_total) and, unless
//     -accept-node-id-change (env ACCEPT_NODE_ID_CHANGE) is set, fails with
//     ErrNodeIDChanged naming both IDs and the way out; GetNodeID stays 0,
//     so ipam never re-derives its subnets from (and never drops the pod
//     allocations outside) the new ID. With the flag the new ID is stored.
//
// With etcd unreachable, a local resync whose mirror holds n's record
// takes that ID (checked against the stored ID as in step 7) and marks the
// re-assert pending. Claim errors (no DB: ErrNoDatabase; etcd unreachable;
// gave up; name taken; ID changed) are returned from Resync wrapped in
// api.FatalError: the agent must not run without an ID. The agent never
// deletes an ID key: contiv-ksr's leader frees the ID of a Kubernetes Node
// gone for its grace period, and only while the presence key of that node
// is absent and the record unchanged (plugins/ksr); an operator may too.
//
// # Re-assert: keeping the ID
//
// Once this node has an ID, the claim is re-asserted: the presence is
// ensured (its lease alive and its key still this agent's, else claimed
// again as above), then the record of the ID is created if absent (same ID
// and name, this node's VPP addresses; compare: absent) and, if present,
// must still name n. This happens:
//
//   - at once in Update when this node's own record is deleted or
//     overwritten while connected (the watch delivers it);
//   - in every remote DB resync (the controller pushes one on every etcd
//     reconnect, so after every gap, after a local resync, and at once
//     when the etcd plugin finds the store replaced behind its endpoints:
//     see "A replaced etcd" below);
//   - in a NodeIDCheck (the keeper saw the lease lost, or PublishNodeIPs
//     saw a conflict);
//   - in any later resync that reaches etcd while a re-assert is pending.
//
// A record naming another node (or that does not decode) is an
// ErrNodeIDConflict naming both nodes and the ID; a presence held by
// another live agent is ErrNodeNameTaken. Either way the node loses its ID
// for good: GetNodeID returns 0, GetAllNodes no longer lists this node,
// every later resync and PublishNodeIPs fail with the same error, and the
// error is an api.FatalError, so the controller stops its loop and the
// agent turns unready; it never serves the duplicate ID. Counted in
// contiv_nodesync_conflicts_total{kind="node-id"|"node-name"}. Any other
// failure (etcd unreachable) is not fatal: the re-assert stays pending
// and the next resync that reaches etcd retries it; in Update the error is
// returned, so the controller schedules a healing resync.
//
// A replaced etcd (restored from an old snapshot, wiped, another cluster
// behind the same endpoints) holds neither this node's record nor its
// presence key. nodesync keeps no watch of its own and lists nothing on a
// timer: the etcd plugin finds the replacement and the controller's
// watcher pushes a remote DB resync (plugins/controller/dbwatcher), whose
// re-assert writes the record again; the presence lease is unknown to the
// new store, so the keeper sees it lost and the NodeIDCheck claims it
// again.
//
// PublishNodeIPs writes the record only where it may: read it, then swap
// it on its mod revision (create it if absent); a record naming another
// node is the same conflict, and a NodeIDCheck is pushed so that the loop
// turns fatal even when the caller ignores the error.
//
// # State and owners
//
//   - The ID and the lost cause (atomics): written by the event loop
//     (Resync, Update) and, on a conflict, by PublishNodeIPs; read anywhere.
//   - The pending re-assert flag: the event loop only.
//   - The registry (nodes, published): under a RWMutex; rebuilt by Resync,
//     patched by Update and PublishNodeIPs.
//   - The presence handle: set by the event loop, read by the keeper and
//     Close, under its own mutex.
//   - The presence value and the instance: set by Init (no instance),
//     then once by the event loop before the first presence claim; fixed
//     once a presence was claimed.
//   - The stored ID (LocalDB NodeIDKey) and the instance (LocalDB
//     InstanceKey): written by the event loop only.
//   - The claim retry (retry.go): a claim that failed because etcd did not
//     answer is not fatal; the event loop arms a timer under the retry's
//     mutex, the timer's goroutine only pushes a ClaimRetry (an upstream
//     resync that claims again), and Close stops the timer for good.
//   - etcd records: this node's record is written by the claim, the
//     re-assert and PublishNodeIPs (serialised among themselves by
//     compare-and-swap); other nodes' records are never written. This
//     node's index key is written by the claim only (in the record's
//     transaction, or after a listing found the record); nothing deletes
//     it.
//
// # Caller duties
//
//  1. Wire ServiceLabel (this node's name), DB (the etcd plugin), Presence
//     (the etcd plugin), LocalDB (bolt), Metrics and EventLoop (the
//     controller), and register the plugin as an event handler after
//     contivconf and before every handler that uses node IDs (ipam): they
//     read GetNodeID in their own Resync. Let the agent call RegisterFlags
//     (-accept-node-id-change, -nodesync-presence-ttl), Init, AfterInit
//     (starts the keeper) and Close (stops it, revokes the presence).
//  2. LocalDB must be a store that no other live process can hold at the
//     same time (the bolt plugin: its file lock), and it must be closed
//     after this plugin (the agent closes plugins in reverse order): the
//     take-over of a killed agent's presence rests on it. Never give two
//     agents one LocalDB, and never run a copy of a node's bolt file
//     under that node's name elsewhere while the node runs (a copy has
//     the same instance: the first claim of the copy would take the
//     original's presence over, and the original would find out only at
//     its next re-assert). -bolt-recover moves the file aside and starts
//     a new one, hence a new instance: the first start on it waits one TTL
//     for a killed agent's key, as without instances.
//  3. Call GetNodeID, GetAllNodes and PublishNodeIPs from any goroutine
//     once Init returned; GetNodeID is 0 until a resync claimed the ID and
//     0 again once it was lost.
//  4. Handle NodeUpdate events: the plugin pushes them as follow-ups from
//     its Update when another node joins (PrevState nil), leaves (NewState
//     nil) or changes its VPP addresses (vppnode records), and when a node
//     that has an ID, this node included, changes its management addresses
//     or any of its pod CIDRs (Kubernetes node records: Node.PodCIDR, and
//     Node.PodCIDRs, every address family in order, so a move of the
//     second family's CIDR alone is an update). PrevState and NewState are
//     copies. Ignore NodeIDCheck: only nodesync handles it.
//  5. Call PublishNodeIPs with this node's VPP addresses of one IP version;
//     it writes this node's vppnode record only when the set of addresses
//     changed and returns the write's error; propagate an api.FatalError.
//  6. To accept a changed node ID, restart the agent once with
//     -accept-node-id-change, then drop the flag.
//
// # Events
//
// HandlesEvent is true for every resync, for NodeIDCheck, for Kubernetes
// state changes of resource "node" (every node), and of "vppnode" for
// every key but this node's own, and for this node's own key when it was
// deleted or now names another node (not for the echo of this agent's own
// writes). Values that are not of the expected type or do not parse are
// logged and skipped, never an error. Resync rebuilds the registry from
// the resync's kube state and pushes no event. Revert does nothing.
package nodesync
