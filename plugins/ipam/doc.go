// Package ipam is the IPAM plugin: node-local IP address management in
// the style of Contiv-VPP.
//
// IPAMs on different nodes never talk to each other. Collisions are avoided
// by cutting the cluster-wide subnets of contiv.conf with the
// cluster-unique node ID that nodesync claims in etcd. From the ID and the
// config the plugin derives, for this node:
//
//   - the pod subnet (podSubnetCIDR cut to podSubnetOneNodePrefixLen, or
//     with useExternalIPAM the Kubernetes node's pod CIDR), its gateway
//     (host 1) and the NAT loopback (the address before the broadcast);
//     pods get the addresses between them: with the defaults and node ID 5,
//     subnet 10.1.5.0/24, gateway 10.1.5.1, pods 10.1.5.2-10.1.5.253, NAT
//     loopback 10.1.5.254;
//   - the VPP-to-host subnet (vppHostSubnetCIDR cut to
//     vppHostSubnetOneNodePrefixLen): VPP end host 1, Linux end host 2
//     (172.30.5.1 and 172.30.5.2 for ID 5);
//   - the node-interconnect address (host <ID> of nodeInterconnectCIDR,
//     192.168.16.5; the static default gateway is stepped over and never
//     handed out) and the VXLAN address (host <ID> of vxlanCIDR).
//
// # Dual stack
//
// With ipamConfig.dualStack the node has a second address family, cut
// from the same node ID with the same rules (its pod subnet, gateway, NAT
// loopback, VPP-host subnet, node-interconnect and VXLAN addresses, its
// service network). Inside, every allocation holds one address per slot
// (addrs: slot 0 the primary family, slot 1 the second) in one ipalloc
// pool per family. A pod's allocation takes one address of every family
// or none: when the second family has none free, the first is rolled back
// before the decision is answered. Its record holds both addresses, the
// CNI reply both addresses and both default routes. The getters of the
// API above answer the primary family; /contiv/v1/ipam shows both. With
// an external IPAM, the node's spec.podCIDRs give the pod subnet of each
// family; a NodeUpdate that moves either pushes PodCIDRChange.
//
// # The Cilium-style surface (seed 002)
//
// cilium.go, timers.go and dump.go give Cilium's agent IPAM calls:
// per-family Allocators, AllocateNext (both families or neither),
// AllocateNextFamily, AllocateIP, ReleaseIP and ReleaseIPString (by
// address or by owner name), expiring reservations
// (AllocateNextWithExpiration, StartExpirationTimer, StopExpirationTimer
// with the ID that must match), exclusions (BlacklistIP, BlacklistIPNet,
// ipamConfig.excludeIPs, ReserveLocalRoutes), Dump and DebugStatus. An
// owner's allocations are owner-keyed (allocKey.seq, pod ID
// {OwnerNamespace, owner}); each call is a barrier on the keeper (see
// "One writer") and returns once its records are durable. Differences
// from Cilium, on purpose: ReleaseIP releases the whole allocation that
// holds the address (a dual-stack pod never keeps one family), releasing
// an address nobody holds is ErrNotAllocated, next-fit instead of a
// random start, and exclusions are applied again at every resync rather
// than kept in the allocator only.
//
// # Pools, cooldown, elastic pools and checkpoints (seed 003)
//
// A family's pod addresses come from blocks (block.go): the subnet cut
// from the node ID first, then the pools added by AddPool (the AWS
// datastore's ENIs) in order; a block is tried once the ones before it
// are full. The added blocks are stored under BlocksKey, through the
// keeper's writer, and restored before the records. RemovePool refuses a pool in use unless force,
// which releases (and logs) every allocation holding one of its
// addresses. A released address cools down (cooldown.go,
// Config.AddressCooldown): held by a key of its own, out of next-fit and
// counted as used, until the sweep frees it; an allocation that finds no
// free address takes the one cooling the longest rather than fail.
// Cooldowns are stored (CoolingPrefix) with the release that starts them
// and survive a restart. With Config.WarmTarget and a
// PoolClaimer (elastic.go), a family whose free addresses fall below the
// warm target claims one more block from nodeipam (package poolblock: the
// node's claim in etcd, its grant from contiv-ksr); a granted block is
// added at once; an added block empty for Config.BlockCooldown is given
// back (removed, then released in the claim). ExportCheckpoint and
// ImportCheckpoint (checkpoint.go) take and restore every allocation in
// the versioned form of package checkpoint; an import is a barrier that
// stores the records and resyncs with the last Kubernetes state before
// anything else is served.
//
// REST (rest*.go) serves Dump and DebugStatus at /contiv/v1/ipam/dump and
// the operator calls (allocate, reserve, confirm, release) under
// /contiv/v1/ipam/operator/, refused unless the REST server
// authenticates its clients; each is logged with who asked.
//
// Expiring reservations (reservation.go): a reserved allocation carries
// an ID and a deadline, stored in its record, so a restart keeps the
// deadline. The sweep timer (absent.go) fires at the earliest deadline
// and releases, like any release, what is still unconfirmed then. A
// confirmed allocation (ConfirmAttachment, StopExpirationTimer) has no
// deadline and never expires. On the CNI path an ADD from a client that
// confirms (podmanager.AddPod.Confirms) is reserved for
// Config.CNIReservationTimeout; contiv-cni confirms once the interface is
// configured, so an ADD whose runtime died releases its addresses at the
// deadline. A repeated ADD of a reserved attachment gets the same
// addresses and a new reservation (the earlier caller can no longer
// confirm); a repeated ADD of a confirmed one gets none.
//
// The same arithmetic answers for other nodes (PodSubnetOtherNode,
// NodeIPAddress(id), ...) and maps a pod IP back to its node ID. A node ID
// that does not fit a subnet is an error, never an address outside it.
//
// Pod addresses are handed out next-fit (the first free address after the
// last one handed out, wrapping around) by an ipalloc pool, idempotently
// per allocation, and stored in bolt before the caller is answered. With
// an external IPAM, a NodeUpdate that moves this node's Kubernetes pod
// CIDR makes the plugin push PodCIDRChange, an upstream resync of every
// handler.
//
// # Allocation identity
//
// An allocation is keyed by the CNI primary key, podmanager.AttachmentKey
// (network, container ID, interface name), and keeps the pod ID it was
// made for. Pod-keyed allocations (empty attachment, identified by the pod
// ID) remain for the pod-ID API (AllocatePodIP, ReleasePodIP), for the
// addresses learned from Kubernetes at a restore, and for migrated v1
// records. The table (table.go) keys its ipalloc.Keyed pool by allocKey
// and indexes pod -> allocations. The rules:
//
//   - AddPod with a key that holds an address returns it (a repeated ADD).
//     The first key of a pod that holds a pod-keyed allocation adopts it:
//     same address, re-keyed, the pod-keyed record deleted in the batch of
//     the new one (a leftover of a failed delete is deleted at the next
//     restore). Otherwise next-fit.
//   - AddPod of a pod (not podmanager.ContainerNamespace) with another
//     container ID on the same network and interface releases the old
//     attachment in the same batch (Contiv's obsolete pod configuration;
//     podmanager normally deletes it first, this covers a podmanager that
//     lost its local pods).
//   - DeletePod releases its key only: an unknown key succeeds and releases
//     nothing, an old container ID never releases the new container's
//     address, and a pod-keyed allocation is never released by a DEL.
//   - GCPods releases every attachment-keyed allocation of its network that
//     is not in its valid list; pod-keyed allocations are untouched.
//   - A pod deleted from Kubernetes, or absent past the grace period,
//     loses every allocation (ReleasePodIP too). Pods in
//     podmanager.ContainerNamespace (plain containers) are never absent and
//     never learned from Kubernetes.
//   - GetPodIP answers the pod's address: interface eth0's if the pod has
//     several, else the lowest. AllocatePodIP of a pod that has an address
//     returns it.
//
// # Store layout and schema
//
// SchemaKey holds the layout version (SchemaVersion, "3"; see schema.go
// for what v3 adds: two addresses per record, reservations, owner
// records, a second cursor; older stores migrate by rewriting SchemaKey
// only). v2 keeps the v1
// keys (AllocationPrefix + "<namespace>/<name>" -> the address, for
// pod-keyed allocations; CursorKey; ConflictPrefix) and adds
// AttachmentPrefix + "<network>/<containerID>/<ifname>" (each part
// url.PathEscape'd) -> JSON {ip, pod {name, namespace}, network,
// containerId, ifName}. A store without SchemaKey is v1: the first resync
// migrates it with one transaction that writes SchemaKey if it is still
// absent (v1 records are v2 pod-keyed records as they are, so none is
// rewritten and nothing can be lost). A failed migration changes nothing:
// the plugin serves the records and the next start migrates. A newer (or
// unreadable) version is refused: the first resync fails fatally with an
// error naming the key and both versions, and nothing is written. A
// record that does not parse is logged and left in place.
//
// # One writer
//
// Every change of the pod addresses (allocate, release, the release of a
// pod deleted from or absent in Kubernetes, resync and re-initialisation,
// the pool list, cooldowns, reservations) is decided by one owner, the
// keeper (keeper.go): one goroutine that takes requests from a channel in
// arrival order and alone touches the table of pod addresses (table.go,
// with its blocks, reservations, exclusions, cooldowns and allocation
// times), the elastic-pool state (elastic.go: blocks wanted, blocks being
// given back, since when each is empty), the input of the last resync,
// the view of the Kubernetes pods, the absence clocks, the records still
// to delete, the stored cooling records and the pipeline (pipeline.go:
// the transactions in flight, the deferred requests, the busy lanes). The
// store's callbacks own nothing: they send outcomes back on a channel.
// The request's reply channels are written by the keeper only, once each
// (submit.go). The derived addressing (subnets, gateway, node addresses)
// is an immutable state value, replaced whole at each resync through an
// atomic pointer and read by any caller. The run-time exclusions
// (BlacklistIP, ReserveLocalRoutes) are a list guarded by Plugin.exclMu:
// any caller appends, each resync reads a copy. The store's health
// (storehealth.go) is written by the keeper and read by any caller under
// its mutex. The claimer goroutine (elastic.go, started by AfterInit,
// stopped by Close) owns only the claim it is sending: the keeper hands
// it each new claim through a one-slot channel, newest wins.
//
// CNI events (AddPod, DeletePod, GCPods) reach the keeper through
// keeper.submit from the event loop: the handler fills the reply from the
// in-memory decision and the CNI reply waits (ev.Await) for the durable
// outcome. Every request names its pod (request.pod) and touches only
// that pod's records, except a GC, which is served like a resync, as a
// barrier through the read path (gc.go).
//
// The owner is a goroutine inside ipam rather than the controller's event
// loop (Contiv's way, where an allocation is an event) because durability
// must not cost throughput: the keeper decides requests in memory while
// the store commits earlier ones, and the store stores the transactions
// queued during one commit together (one fsync, group commit). The event
// loop processes one event at a time and runs every handler for it;
// making each allocation an event would give each its own fsync. The loop
// still orders resyncs and pod events: its handler calls wait for the
// keeper.
//
// # Writes and their outcomes (one batching layer)
//
// The keeper decides one request at a time in memory and hands the
// writes of each decision (a record, the delete of an adopted or obsolete
// one, the cooling records of a release, the next-fit cursor, stale
// deletes riding along) to the store as one transaction, in decision
// order (kvdb.Submitter: bolt's write queue). The store is the one layer
// that groups writes: bolt's committer stores the transactions queued
// during one commit in the next, with one fsync. The keeper does not
// batch. A request is answered twice: submit returns the decision as
// soon as it is taken in memory (the address, or why there is none), and
// final waits for its durable outcome; do is submit then final. The
// AddPod handler fills its reply from the decision and hands final to
// podmanager, which waits for it after the event loop has moved on, so
// the next ADD is decided during this one's fsync. The store reports
// each outcome on a channel; the keeper goroutine runs the writes' done
// callbacks (every state change stays on it).
//
// The outcomes are the store's, by kvdb's "Write outcomes" contract:
// durable, not applied (the store refused it, or withdrew it from its
// queue when the request's context or storeTimeout ended first: the
// decision is undone), or unknown (resolved write by write with reads the
// store orders after the transaction, off the keeper goroutine; a write
// that stays unknown leaves its address reserved for its pod: unsure).
// Once the store has taken a transaction, its outcome is the commit's,
// however long the commit takes; a barrier's writes wait for it too.
//
// A request belongs to the lane of its pod (request.lane). A lane is busy
// while one of its transactions is in flight, or while one of its
// requests is deferred.
//
// The keeper's rules, each pinned by a test in interleave_test.go,
// pipeline_test.go or exactness_test.go:
//
//  1. A caller's final answer comes once its record's outcome is known:
//     durable (success), not applied (the decision is undone), or
//     unknown. A request that needs no write (the address is held and
//     durable already) has its final answer with its decision. final(ctx)
//     returns ctx's error when ctx ends first; the outcome still happens.
//  2. Nothing is freed on a guess: a write that is not applied is undone;
//     one of unknown outcome is read back (ordered after it) before
//     anything is freed; one that cannot be read back leaves the address
//     reserved for its pod (unsure), and that pod's next allocation
//     stores the record again before it answers.
//  3. A request whose lane is busy is deferred, in order within its lane,
//     and decided once its lane's writes have their outcome: a release
//     never overtakes a store, and a failed store is undone before
//     anything later for that pod is decided. Other pods' requests are
//     decided meanwhile. The Revert of an AddPod is such a release.
//  4. A released address stays held until its delete is durable; then it
//     cools down (Config.AddressCooldown), then next-fit reaches it only
//     after the rest of the window.
//  5. A resync, a read, the sweep and the store probe are barriers
//     (reqKind.barrier): each runs once nothing is in flight and nothing
//     is deferred, so a resync rebuilds from a store that holds every
//     acknowledged allocation. While a barrier waits, the keeper takes no
//     new requests.
//  6. The next-fit cursor is stored with every allocation, and the
//     deletes of stale records that a resync could not delete ride along
//     with later transactions until they succeed.
//  7. Every stored record lies in a stored pool: a pool is added to the
//     stored list (a barrier, durable) before anything is allocated from
//     it, and removed only after every record in it is deleted (the
//     deletes first, the list last, in one transaction when they fit).
//  8. No request is decided after its caller gave up: a request whose
//     context has ended when the keeper comes to it is dropped (an ADD
//     that reached IPAM after its DEL allocates nothing), and its writes
//     still queued in the store are withdrawn when it ends.
//  9. Bounded: the keeper holds at most queueLen requests in its channel,
//     maxDeferred deferred and maxInflight transactions in the store's
//     queue. CNI calls and the pod-ID API are told to try again later
//     (podmanager.ErrTryAgain, CNI code 11, counted in
//     contiv_ipam_requests_refused_total) when the channel or the
//     deferred list is full, or the store's queue is; the event loop's
//     own requests wait.
//  10. Close waits for the outcomes of the transactions in flight (at
//     most storeTimeout: those still out then answer with an error of
//     unknown outcome); the deferred and queued requests fail, decision
//     and final, with "IPAM is closed". No caller is left waiting.
//
// IPAM is not ready (health Error) while the store does not take its
// writes (a full disk, a commit slower than storeTimeout, a failed
// store), and ready again once one is durable: while it fails, the keeper
// writes ProbeKey every two seconds, so that a recovery is seen without
// traffic.
//
// # Resync
//
// Every resync (each DB resync, healing resyncs, PodCIDRChange) rebuilds
// the table: the pool list first (membership before records), then the
// pods of the Kubernetes state with an address in a pod subnet (the first
// by key wins a clash), then the stored records, newest first, then the
// stored cooldowns; Kubernetes wins over a record. Restore never destroys
// a record it cannot place: one outside every pod subnet and pool of the
// node, one losing a clash, one that does not fit is moved aside under
// ConflictPrefix with its key, value and reason, logged at error level
// and counted (contiv_ipam_records_moved_aside_total); an operator lists
// them (GET /contiv/v1/ipam/conflicts, contiv-netctl ipam conflicts) and
// restores or discards each. With a Kubernetes state from etcd (a remote
// DB resync, and the watch after it), a held pod that the state lacks is
// released at once if the previous state had it (its delete event was
// lost in a watch gap), else after Config.AbsentPodGracePeriod (it may
// not be reflected yet, or was deleted while the agent was down). An
// address acknowledged within the last grace period is released no sooner
// than a grace period after its acknowledgment, even when an earlier
// release of its pod as deleted failed: the pod may be a re-created one
// that the state does not show yet. A resync from the local mirror
// releases nothing and pauses the grace periods.
//
// # Caller duties
//
//  1. Build with NewPlugin; wire ContivConf, NodeSync, ServiceLabel and
//     LocalDB (bolt; nil keeps the addresses in memory). PodCIDRChange is
//     pushed as a follow-up through the transaction of the Node Update.
//  2. Call Init, then AfterInit (it starts the keeper) before the first
//     resync, and Close after the last event: Close waits for the commit
//     in flight and fails the calls not yet stored (rule 7).
//  3. Register the plugin as an event handler after nodesync (it reads the
//     node ID in Resync). Its handler calls block until the keeper has
//     served them.
//  4. Call AllocatePodIP and ReleasePodIP from any goroutine once a resync
//     has run; errors name the pod and the address. An error wrapping
//     ipalloc.ErrPoolExhausted means the pod subnet is full.
//  5. podmanager pushes AddPod, DeletePod and GCPods as blocking events
//     and, after WaitDone, calls Wait: the handlers Await the durable
//     outcome. Their errors wrap podmanager.ErrTryAgain (no node ID or pod
//     subnet yet), podmanager.ErrBadRequest (an incomplete or too long
//     attachment key, bad ipamData) or ipalloc.ErrPoolExhausted.
//     AttachmentIPs and FreeAddresses (podmanager.IPAM, for CHECK and
//     STATUS) may be called from any goroutine.
//  6. A store of an unknown newer SchemaVersion makes the first resync
//     fail fatally: run the newer agent, or move the file aside.
//  7. The Cilium-style calls may be made from any goroutine once a
//     resync has run (before, they fail as not ready; BlacklistIP and
//     ReserveLocalRoutes are kept and applied at the first resync).
//     ReserveLocalRoutes reads the routes of the calling thread's network
//     namespace: call it from the agent's namespace.
package ipam
