// Package nodeipam hands Kubernetes Nodes their pod CIDRs: Kubernetes'
// node IPAM (the RangeAllocator, the CloudAllocator and the IPAMFromCluster
// and IPAMFromCloud sync modes) on our allocator engine. contiv-ksr's
// leader runs it (plugins/ksr, nodeIPAM in ksr.conf); the agents follow
// the CIDR it sets when useExternalIPAM is on (Node Update -> Pod CIDR
// Change), so one engine, engine/ipalloc, serves both pod addresses
// and node ranges.
//
// # The engine
//
// A CIDRSet is the node-sized blocks of one cluster range: an ipalloc.Pool
// whose offsets are block indices (block i is the i-th subnet of the node
// mask size), handed out next-fit like Kubernetes' cidrset, so the two give
// the same CIDR to every node (tests/nodeipamdiff checks it against the
// real one). The blocks that overlap the service ranges are reserved in
// the pool: never handed out, not counted in Size. Up to 64 bits of
// blocks (a /48 cut in /112s) work; Kubernetes stops at 16 for IPv6.
//
// # What the range allocator does, in order
//
//  1. New lists every Node (retrying until it can: nothing is handed out
//     before the allocator knows what the nodes hold) and occupies the
//     CIDRs they hold. A CIDR outside every cluster range is reported
//     (Event CIDROutOfRange) and never overwritten; one that another node
//     holds is reported (CIDRConflict), and the first holder keeps it.
//  2. Then the pending claims of the Ledger: a claim is written before a
//     node is patched and deleted once the node holds its CIDRs, so a
//     claim found at start is an allocation whose patch may or may not
//     have landed. A claim of a node that still exists (same UID) without
//     CIDRs is reserved again and patched with the same CIDRs; the other
//     claims are deleted.
//  3. Run queues every node of the informer and every node it sees change
//     or go; Config.Workers goroutines handle them, a node never by two at
//     once.
//  4. A node without CIDRs gets the next block of every range (a range that
//     is full undoes the others: Event CIDRNotAvailable, condition
//     PodCIDRAllocated=False, retried with backoff and whenever a block is
//     freed). The claim is written (with the leadership's fence: a replica
//     that lost the lead writes nothing and patches nothing), then the Node
//     is patched (spec.podCIDR and spec.podCIDRs, which the API server lets
//     go only from empty to set), up to 3 times. A node gone meanwhile has
//     its blocks freed; a node that got other CIDRs meanwhile keeps those.
//     After 3 failures the blocks stay reserved and claimed (the outcome
//     is unknown) and the node is retried with the same CIDRs.
//  5. A node that is gone (or replaced by another of the same name) has
//     its blocks freed, and only its own: a block another node holds is
//     never freed on its behalf. With Params.Agents its blocks are fenced
//     first (see Fences) and freed only when the fence lifts.
//
// # Failover
//
// Between a new leader's list and the patches of the old one, the claims
// are what keeps a CIDR from being handed out twice: a claim is durable
// before its patch is sent, the new leader reads the claims after it is
// elected (so after every claim the old leader could still write), and the
// old leader's late patch can only set the claimed CIDR on the claimed
// node, which the new leader honours.
//
// # The cloud allocators
//
// CloudAllocator copies each node's ranges from the Cloud to the Node once,
// retrying with backoff while the cloud has none. IPAMController runs one
// sync loop per node (nodeSync: one goroutine, its own Timeout) in one
// SyncMode: SyncFromCloud (IPAMFromCloud) copies the cloud to the Node and
// keeps checking every Resync; SyncFromCluster (IPAMFromCluster) cuts the
// CIDRs from the cluster ranges, writes them to the cloud (fenced in
// contiv-ksr), then patches the Node. A mismatch is reported, never
// overwritten. A range outside the cluster ranges (when they are set) is
// reported and copied neither way: not onto the Node in SyncFromCloud,
// not into the cloud in SyncFromCluster (Kubernetes' sync refuses it
// too). In SyncFromCluster the cloud write is the durable record:
// a node without CIDRs whose cloud ranges are free blocks of the ranges
// gets them (at start, before any loop runs, and in its loop).
//
// # The pool block server
//
// PoolBlockServer is the server side of plugins/ksr/model/poolblock: the
// agents' elastic pools ask for added pod-address blocks beyond the
// subnet their node ID gives them. An agent writes its claim
// (codec.KSRPrefix + poolblock.ClaimKey(node): Want, per family, the
// added blocks it wants to hold; Release, granted blocks it stopped
// using); the server writes its grant (poolblock.GrantKey(node): the
// blocks it holds, in grant order). The blocks come from
// PoolBlockConfig.ClusterCIDRs (poolBlocks in ksr.conf), one CIDRSet per
// family, next-fit. contiv-ksr's leader runs it; in order:
//
//  1. Start reads the generation key (below), then every grant, and
//     takes their blocks, nodes in key order: a block in two grants
//     (corrupt) is reported (Event PoolBlockConflict) and kept by the
//     first node; the other holds it too, and it is free only once both
//     dropped it. A block outside the ranges is reported
//     (PoolBlockOutOfRange) and stays in its grant. A grant that cannot be
//     decoded fails Start (its blocks are unknown). Then it lists every
//     claim (an invalid one is reported, InvalidPoolClaim, and ignored).
//     Start writes nothing.
//  2. Run watches the claims from that list on (a broken watch lists them
//     again, taking every claim as listed, and watches after the list) and
//     the Nodes, and handles one node at a time (every node with a grant
//     or a claim first). No list runs on a timer, here or in the presence
//     watch: a kvdb watch delivers every change or closes its channel
//     (kvdb's contract, tested against etcd and bolt), and the etcd plugin
//     closes it on a compaction and when the store behind its endpoints
//     is replaced. A periodic list was once added for a claim watch "seen
//     to deliver nothing": that watch, created just after the claims were
//     written, was an etcd watcher from a past revision, which etcd
//     catches up every 100 ms; the test had looked before.
//  3. A node whose Node was deleted (or replaced: another UID), or that
//     the informer and then the API do not know, is fenced while its
//     agent may still hold addresses (see Fences): its grant keeps its
//     blocks and gets no new ones; a block its claim releases is freed as
//     in step 5. Once the fence lifts (or at once when the grant holds
//     nothing), its grant (compared with its mod revision) and its claim
//     are deleted in one fenced transaction that also requires its
//     presence key to be absent; then its blocks are freed. A replaced
//     or re-created Node whose agent is present is served again (the
//     agent that serves the name holds the grant).
//  4. Otherwise held = grant minus the claim's Release; per family, while
//     held has fewer than min(Want, maxBlocksPerNode) blocks of it, the
//     next free block is appended (never one the claim releases). A full
//     range (or no range of that family): Event PoolBlockNotAvailable
//     once, the node waits and is handled again whenever a block is
//     freed. Nothing else shrinks a grant: a lower Want keeps the blocks.
//  5. The grant is written when it changed, in one transaction with the
//     fence, a compare of the grant's mod revision (absent for a first
//     grant) and of the generation key's, which the write bumps. Only
//     once it is durable are the released blocks freed (and the waiting
//     nodes woken), so a released block reaches another node only after
//     the grant without it is in etcd.
//  6. A refused write: a lost fence is ErrLostLead (Run returns it);
//     otherwise another writer changed a grant: the blocks taken for the
//     write are freed, every grant is read again, and the node is handled
//     again. A write of unknown outcome (timeout) keeps every block it
//     touched held, and the next node handled first reads every grant
//     back (as the ledger's writes are).
//
// Owners: the server's worker goroutine alone writes and rereads grants,
// hands out or frees blocks and starts or lifts fences; the claim watch
// (and its list after a break), the Node handlers, the presence watch and
// the fence timers only record claims and deletions and queue nodes, under
// the server's mutex (PoolBlockServer's fields say which it guards).
//
// Invariants: a block is in at most one grant at every revision of etcd;
// every block handed out is a block of a range, of its family's size; a
// grant holds at most maxBlocksPerNode added blocks per family (unless it
// held more before a config change); a node holds min(Want,
// maxBlocksPerNode) per family when the range has room. They rest on the
// generation key: every grant write compares it, so a server whose view
// is stale (a second writer, or its own write of unknown outcome that
// lands late) cannot hand out a block another grant took meanwhile:
// its write is refused and it reads again. The fence alone keeps a
// deposed leader from writing; the generation key also holds when two
// servers believe they lead. The server's state (the book of blocks and
// owners, the grants as last read or written, the claims, the nodes
// waiting) is under its mutex; only the worker goroutine writes and
// rereads grants; the claim watch and the node handlers only record and
// queue.
//
// # Fences: one block, one node
//
// A Node can be deleted from the API while its agent still runs with pods
// in its blocks. Nothing of such a node is handed to another node while
// its agent may still hold addresses there:
//
//  1. The agents' presence keys (vppnode.PresenceKey, written by nodesync,
//     bound to the agent's lease) say which agents run. A PresenceWatch
//     lists them and watches them from that list on; AbsentSince(node) is
//     since when a key has been absent without a break (a list counts
//     from the time it was taken: what happened before a gap is unknown).
//     While nothing is known (before the first list, after a watch broke)
//     every agent may hold addresses.
//  2. A gone node is fenced: the range allocator keeps its CIDRs in the
//     book and writes the fence into the node's ledger record
//     (Claim.Fenced; a fence not yet written is never lifted, and a new
//     leader restores it from there, together with the pending claims of
//     nodes that are gone, whose patch may have landed); the pool block
//     server keeps its grant. Both log it.
//  3. The fence lifts only on two looks across the grace period
//     (AgentGrace, DefaultAgentGrace): the key absent since the first (as
//     watched) for the grace period, and absent when read again (the range
//     allocator reads it; the pool block server compares its absence in
//     the transaction that deletes the grant). A timer on the injected
//     clock queues the node when the grace period ends; the watch queues
//     it when the key comes or goes.
//  4. Before that, the agent itself frees pool blocks: a block in its
//     claim's Release is freed once the grant without it is durable.
//  5. A node of the fenced name that comes back is the agent's again (one
//     live agent per name): a Node created again without CIDRs gets the
//     fenced CIDRs back (completed with fresh blocks of the ranges they
//     lack); a pool node back with its agent present is served again.
//
// Fences show in Status().Fenced and PoolBlockStatus.Fenced and in the
// gauges contiv_nodeipam_cidrs_fenced and contiv_nodeipam_pool_blocks_fenced.
// What is not covered: a Node deleted while no leader runs (between two
// leaderships) is never seen by the range allocator, so its CIDR is not
// fenced (the Node was its only record); an agent cut off from etcd for
// longer than its lease TTL plus the grace period loses its blocks while
// it may still run; IPAMFromCluster frees a deleted Node's CIDRs at once
// (its loops are not fenced yet), and without Params.Agents the range
// allocator frees them at once too, as Kubernetes does.
//
// # State and owners
//
//   - The CIDRSets, the block owners, what each node holds, the nodes
//     that wait and the fences (with their timers): the RangeAllocator,
//     under its mutex, held for bookkeeping only (never across an API or
//     etcd call). A node's fence is changed by the worker that handles the
//     node; timers and the presence watch only queue it.
//   - What is known of the agents' presence: the PresenceWatch, under its
//     mutex; its Run goroutine writes, AbsentSince reads. Its caller runs
//     it (contiv-ksr for the range allocator; the PoolBlockServer runs its
//     own in Run).
//   - The queue: client-go's workqueue (a key is handled by one worker at
//     a time).
//   - The claims: the Ledger (etcd under Config.ClaimPrefix in contiv-ksr).
//     EtcdLedger's queue of writes (a groupWriter): under its mutex; the
//     one caller that is the committer at a time takes groups from it and
//     gives each write its outcome; the others only wait (or leave when
//     their context ends, their write still queued).
//   - The blocks of the cloud allocators (syncSets, a blockBook): under
//     its mutex; each node's loop state: that loop's goroutine.
//   - A Timeout: the one loop that owns it.
//
// # Caller duties
//
//  1. Give New a client that may get, list, watch and patch nodes,
//     patch nodes/status and create events, a node informer, and a Ledger
//     whose writes carry the leadership's fence when several replicas run;
//     and, where agents run, Agents (a PresenceWatch on etcd that you run
//     for as long as the allocator), so that deleted Nodes are fenced.
//  2. Run it only while leading, and stop it (close stop) when the lead is
//     lost; build a new one (New) for the next leadership.
//  3. Register Metrics once and pass the same Metrics to every allocator.
package nodeipam
