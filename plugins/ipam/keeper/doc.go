// Package keeper is the allocation core of the IPAM plugin: the table of
// this node's pod addresses, its single writer (the keeper) and the
// restore of the table from the local store at every resync. The IPAM
// plugin's surfaces (CNI attachments, the seed-001 pod-ID API, Cilium's
// calls, the pools, checkpoints, REST) are its clients: each is a method
// of Keeper, or a Request it serves, that runs on the keeper's goroutine.
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
//   - A pod deleted from Kubernetes, or absent, is missing (so is a pod
//     whose name the state holds with another UID than the allocation's);
//     its missing allocations are released only when seen missing twice,
//     a grace period apart, on fresh evidence (evidence.go: contiv-ksr's
//     mirror marker changed within three heartbeats and after the
//     allocation). Pods in
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
// the view of the Kubernetes pods (with their UIDs), the absence clocks,
// what contiv-ksr's mirror marker said (evidence.go), what the container
// runtime's last list said and the runtime GC's suspects (runtime.go: set
// by UseRuntime before Start, then run's), the records still
// to delete, the stored cooling records and the pipeline (pipeline.go:
// the transactions in flight, the deferred requests, the busy lanes). The
// store's callbacks own nothing: they send outcomes back on a channel.
// The request's reply channels are written by the keeper only, once each
// (submit.go). The derived addressing (subnets, gateway, node addresses)
// is an immutable state value, replaced whole at each resync through an
// atomic pointer and read by any caller. The run-time exclusions
// (BlacklistIP, ReserveLocalRoutes) are a list the IPAM plugin guards (its
// exclMu): any caller appends, each resync passes a copy. The store's health
// (storehealth.go) is written by the keeper and read by any caller under
// its mutex. The claimer goroutine (elastic.go, started by AfterInit,
// stopped by Close) owns only the claim it is sending: the keeper hands
// it each new claim through a one-slot channel, newest wins.
//
// CNI events (AddPod, DeletePod, GCPods) reach the keeper through
// Keeper.Submit from the event loop: the handler fills the reply from the
// in-memory decision and the CNI reply waits (ev.Await) for the durable
// outcome. Every request names its pod (Request.Pod) and touches only
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
// A request belongs to the lane of its pod (Request.lane). A lane is busy
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
//     (ReqKind.barrier): each runs once nothing is in flight and nothing
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
// released only when it is seen missing twice, Config.AbsentPodGracePeriod
// apart (it may not be reflected yet, its delete event may have been lost
// in a watch gap, or the store may have been emptied or replaced: one look
// cannot tell them apart). A state without any pod at all is no evidence:
// no grace period runs until a resync sees pods again. An address
// acknowledged within the last grace period is released no sooner than a
// grace period after its acknowledgment: the pod may be a re-created one
// that the state does not show yet. A resync from the local mirror
// releases nothing and pauses the grace periods.
//
// # Caller duties
//
//  1. Build with New (the local store, nil to keep the addresses in
//     memory; ipam.conf; a logger; a Clock; NewMetrics, registered by the
//     caller); set OnStoreHealth before Start if you follow the store's
//     health.
//  2. Start the keeper, then send the first resync (Request ReqResync
//     with a ResyncInput) before anything else: until then every call
//     that reads or changes the table fails with ErrNotReady.
//  3. Send requests with Submit (the decision at once, the durable
//     outcome later) or Do (both), from any goroutine. Set Request.Ctx to
//     the caller's context when its caller may give up (CNI calls), and
//     MayRefuse when the caller may be told to try again later rather
//     than wait (CNI calls, the pod-ID API; never the event loop's
//     resyncs and Kubernetes pod events).
//  4. Call the other methods (pools, owner allocations, timers,
//     exclusions, checkpoints, conflicts, queries) from any goroutine once
//     a resync has run; each returns once its change is durable.
//  5. Read Claims from one goroutine (the claimer of the elastic pools)
//     and write each claim it hands over.
//  6. Close once, after the last request: it waits for the writes in
//     flight (at most storeTimeout) and fails what was not decided.
package keeper
