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
// "One writer") and returns once its records are durable. As in Cilium,
// each address an owner gets is an allocation of its own, with its own
// expiration timer, and ReleaseIP releases that address (the allocation
// of a pod's CNI attachment holds both families and is released whole).
// The differences from Cilium, each with its reason, are one table in
// tests/ciliumdiff (table_test.go), asserted against Cilium's pkg/ipam.
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
// # Where the parts are
//
// The plugin is the surfaces: the seed-001 API (the addressing getters,
// AllocatePodIP, ReleasePodIP), the CNI attachments (the AddPod,
// DeletePod and GCPods handlers), Cilium's calls (cilium.go, timers.go,
// dump.go), the pools, checkpoints and records moved aside
// (delegations.go), the events of the controller (events.go) and REST
// (rest*.go). The addressing derived from contiv.conf and the node ID is
// package addressing (immutable values, pure functions). Every decision
// about the pod addresses, their durable store and their restore is the
// allocation core, package keeper: one goroutine, the keeper, owns the
// table of allocations and is the only writer of their records; its
// doc.go is the contract (allocation identity, the store layout, the
// single writer, the outcomes of its writes, the resync). The surfaces are
// its clients: they call its methods, which run on its goroutine, and
// never touch the table.
//
// # The status page (GET / for browsers)
//
// statuspage.go serves the REST server's HTML index (rest.SetIndexPage;
// the JSON index is unchanged): the node's addressing, each pool's fill,
// the allocations and releases of the last hour, the last CNI errors,
// reservations, cooldowns, release candidates and links to every
// endpoint. A render reads snapshots only: the addressing pointer, one
// inspection of the keeper (keeper.Status, not waiting for the writes in
// flight), the candidates and two rings. The owners of its state:
//
//   - series (series.go): 60 one-minute buckets of allocations and
//     releases; written by the keeper's goroutine (keeper.Activity, at the
//     keeper's clock, as each becomes durable), read by renders; guarded
//     by its own mutex.
//   - cniErrors (cnierrors.go): the last 20 CNI ADDs and DELs answered
//     ERROR; written by podmanager's call goroutines (CNIFailed, the
//     plugin being podmanager's FailureObserver), read by renders; guarded
//     by its own mutex.
//
// # The status record
//
// With Deps.StatusDB (etcd) and ipam.conf statusPublishPeriod > 0, the
// agent publishes its status record (package agentstatus: node name and
// ID, REST URL from Deps.REST, readiness, the used and total addresses of
// each pool, pods held, release candidates) at agentstatus.Key(node) after
// the first resync: when it changed, at least every two periods, and
// within a second of a readiness change; Close deletes it. Its owner is
// the status publisher's goroutine (statuspub.go): it alone snapshots and
// writes, outside the event loop, through the keeper's read requests; a
// failed write is logged (rate-limited) and tried again next period.
//
// # Caller duties
//
//  1. Build with NewPlugin; wire ContivConf, NodeSync, ServiceLabel and
//     LocalDB (bolt; nil keeps the addresses in memory). PodCIDRChange is
//     pushed as a follow-up through the transaction of the Node Update.
//  2. Call Init, then AfterInit (it starts the keeper) before the first
//     resync, and Close after the last event: Close waits for the writes
//     in flight and fails the calls not yet decided (see package keeper).
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
