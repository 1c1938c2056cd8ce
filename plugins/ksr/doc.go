// Package ksr is the Kubernetes state reflector that contiv-ksr runs: it
// mirrors the Nodes, Pods and Namespaces of the API server into etcd
// under codec.KSRPrefix, in the models' format (plugins/ksr/model), so
// that the agents, which never talk to the API server, follow the
// cluster through etcd. It also frees the node IDs of Nodes that are
// gone.
//
// # What is written
//
//   - k8s/node/<name>: node.Node (name, spec.podCIDR as pod_CIDR,
//     spec.podCIDRs as pod_CIDRs, spec.providerID, status.addresses,
//     status.nodeInfo);
//   - k8s/node-pods/<node>/<name>/namespace/<ns> (podLayout "node", the
//     default: scheduled pods alone, under spec.nodeName) and/or
//     k8s/pod/<name>/namespace/<ns> ("cluster", or "both"): pod.Pod
//     (name, namespace, labels in
//     both forms, status.podIP as ip_address, status.podIPs as
//     ip_addresses, status.hostIP as host_ip_address, containers with
//     their ports, and the annotations
//     whose key starts with AnnotationPrefix);
//   - k8s/namespace/<name>: namespace.Namespace (name, labels in both
//     forms, contivpp.io annotations);
//   - contiv/mirror/status: the mirror marker (plugins/ksr/model/mirror:
//     leader, the pods' listed resource version, the number of pods
//     mirrored, a heartbeat and its period), written by the leader once
//     its mirror is complete (after its resync, with no changed object
//     waiting) and then every Config.MirrorHeartbeat, each heartbeat after
//     the last one written or read (a new leader starts after the marker
//     its predecessor left). Agents release the addresses of pods missing
//     from the mirror only while this marker is fresh.
//
// Values are encoded with codec.Marshal (deterministic bytes), and a key
// is written only when its bytes would change: an update of a field that
// is not mirrored (a pod's phase, a node's heartbeat) writes nothing.
//
// # Leadership
//
// Every replica runs the informers; one leads, elected through etcd under
// Config.ElectionPrefix (kvdb.ElectionStore), and only the leader writes.
// Each write is one transaction that carries the leadership's fence, so a
// replica that lost the lead (its lease expired while it was paused, the
// leader key was deleted) cannot write, even before it notices: the
// refused transaction makes it stand by and campaign again. A dead leader
// is replaced within Config.ElectionTTL; a clean stop resigns at once.
//
// # The loop of the leader
//
//  1. On taking the lead: a mark-and-sweep resync. List every mirrored
//     prefix in etcd; write the keys etcd lacks (added) or holds with
//     other bytes (updated); delete the keys the informers' stores lack
//     (deleted, stale). Each resync logs and counts what it fixed
//     (contiv_ksr_resync_fixes_total{resource,fix}); keys outside the
//     mirrored prefixes (allocatedIDs/, nodeconfig, ...) are never touched.
//  2. Then the objects the informers saw change, as they come: each is read
//     back from its store (so many updates of one object coalesce into one
//     write) and compared with what etcd holds.
//  3. A resync again every Config.ResyncPeriod, on POST ResyncPath, and
//     after any write that failed: its outcome is unknown, so what etcd
//     holds is listed again after a pause (100ms doubling to 5s; health
//     Error meanwhile).
//  4. The node IDs (below) after every resync, when a Node is deleted,
//     when the earliest one is due, and every min(grace period, 30s)
//     while a past-due one is blocked by its agent.
//
// The dirty objects are taken before a resync reads the stores: a change
// the informers deliver during the resync is in the next set and written
// after it.
//
// # Node IDs
//
// nodesync never frees a node ID. The leader frees the ID of a Node that
// has been gone from the API for Config.NodeIDGracePeriod: it deletes
// allocatedIDs/<id> in one transaction that compares the record's mod
// revision as listed (an agent that came back rewrote it), the absence of
// the node's presence key (vppnode.PresenceKey: no agent serves the node)
// and the fence. A past-due ID that cannot be freed is listed as blocked
// and checked again every min(grace period, 30s) and at every resync. The time a Node went is taken from the
// informer's delete (every replica tracks it, so a new leader keeps the
// old deadline); a Node already gone when the replica started counts from
// when it first sees the record, so a takeover can lengthen the grace
// period but never shorten it. A Node that comes back is forgotten. Each
// release is logged and counted (contiv_ksr_node_id_releases_total).
//
// # Node IPAM
//
// With Config.NodeIPAM.Enabled the leader runs the node pod-CIDR allocator
// (plugins/nodeipam) for as long as it leads: started with the leadership
// (in its own goroutine, so listing the Nodes does not hold up the
// mirror), stopped and waited for when the lead ends. Its claims are
// written with the leadership's fence. Its status is read by REST through
// the ipam book; its metrics are registered once and shared by the
// allocators of successive leaderships.
//
// With Config.PoolBlocks.ClusterCIDRs set the leader runs the pool block
// server (plugins/nodeipam, PoolBlockServer) the same way: started with
// the leadership in its own goroutine (Start retried with backoff while
// etcd fails), its grants written with the leadership's fence, stopped
// and waited for when the lead ends; its metrics are registered once.
//
// # State and owners
//
//   - The mirror (what etcd holds, mirror.held) and the releaser: the loop
//     goroutine only (run, lead).
//   - The dirty set: informer handlers add, the loop takes; under its
//     mutex.
//   - The absence times: node handlers write, the loop reads; under its
//     mutex.
//   - The status book: the loop writes, REST reads a copy; under its mutex.
//   - The heartbeat (whether a marker is due, the last heartbeat): the
//     loop goroutine only (leader.beat).
//   - The running node CIDR allocator (ipam book): the loop sets it, REST
//     reads it; under its mutex.
//   - The informers' stores: client-go owns them; everyone reads.
//   - The cluster page's state (clusterPageState: the node-ID records
//     decoded for the last view, the last page's size): the page's
//     handlers, any number at once; the records under its mutex, the
//     size atomic.
//
// # Caller duties
//
//  1. Wire DB and Election (the etcd plugin: DB is addressed with full
//     keys), and optionally HTTP, Metrics and StatusCheck; give the
//     kubeconfig with -kubeconfig, KUBECONFIG or ksr.conf, or run in a pod
//     (in-cluster service account), or pass a client with UseClient.
//  2. The API credentials need get, list and watch on nodes, pods and
//     namespaces; node IPAM also needs patch on nodes and nodes/status and
//     create/patch on events.
//  3. Call Init, then AfterInit (it starts the informers and the loop),
//     and Close (it resigns a held lead and stops everything).
package ksr
