// Package podmanager serves the agent's CNI API (cni.RemoteCNI: Add,
// Delete, Check, GC, Status, Confirm) over gRPC on a unix socket, turns
// Add, Delete and GC into the blocking AddPod, DeletePod and GCPods events
// of the controller's loop, and records the pods connected on this node.
//
// # The socket
//
// AfterInit creates socketPath (podmanager.conf) with mode 0600 and serves
// it; its directory is created with mode 0700 when missing. The socket is
// created in a fresh private directory (0700) beside the path, chmod-ed,
// then hard-linked to the path: no other user can connect at any moment,
// no umask is touched, and link(2) never replaces a file that appeared
// meanwhile. What is at the path first decides:
//
//   - nothing: fine;
//   - a socket nobody accepts on (connection refused): stale, removed;
//   - a socket that accepts: ErrSocketInUse, naming the path (another
//     agent serves it), and the agent does not start;
//   - anything else (a file, a directory, a symlink): ErrNotSocket, naming
//     the path; it is never removed.
//
// LoadConfig already looks (changing nothing), so a second agent on the
// same socket stops before any plugin has created anything (etcd data,
// bolt file); AfterInit looks again and replaces a stale socket.
//
// The socket is bounded (podmanager.conf; limitListener, gRPC options):
//
//   - at most maxConnections connections are open at once; the next one is
//     accepted only when an open one closes, and waits in the kernel's
//     accept backlog meanwhile (a client dialing into a full backlog gets
//     EAGAIN). A flood of connections therefore delays the clients that
//     dial behind it (by about the flood's size / maxConnections *
//     handshakeTimeout) but never costs the agent more than maxConnections
//     file descriptors;
//   - a connection that has not completed the gRPC (HTTP/2) handshake
//     handshakeTimeout after it was accepted is closed (and counted);
//   - a connection with no call in flight for idleTimeout is closed
//     (GOAWAY first); a call in flight is never cut by it.
//
// Close first ends every call in flight (they answer code 11, "try again
// later": nothing of them was acknowledged), stops the server gracefully
// (at most gracefulStopTimeout, then cuts the connections; handshakes in
// progress are cut at once, as gRPC's stop would wait for their deadline)
// and removes the socket file if it is still the one it created.
//
// # A call
//
//  1. The request is validated: container_id, interface_name and
//     network_name must be set; extra_arguments ("K=V;K=V", CNI_ARGS) must
//     be pairs. K8S_POD_NAME and K8S_POD_NAMESPACE give the pod ID (both or
//     neither; other keys are ignored); without them the pod ID is
//     {ContainerNamespace, container ID}. Add also applies the CNI spec's
//     rules on names (container_id and network_name: an alphanumeric, then
//     alphanumerics, '_', '.', '-'; interface_name: at most 15 bytes, no
//     '/', ':' or white space, not "." or ".."); Delete and Check accept
//     any non-empty name, as a key that could not be added holds nothing.
//     Confirm takes the key as Delete and Check do (container_id,
//     interface_name, network_name set) and a non-empty reservation; it
//     has no extra_arguments. A bad request is ErrBadRequest, naming the
//     field and the value, and never reaches the loop (nor IPAM).
//  2. The call's context is the RPC's, bounded by requestTimeout and by
//     the plugin's life (Close).
//  3. Add: if the pod is recorded with another container (Contiv's
//     obsolete pod configuration), a DeletePod is pushed for each of the
//     old container's attachments and waited for (durable) first. Then the
//     AddPod is pushed; the loop runs podmanager's Update (records the
//     pod), then IPAM's (allocates, fills the outputs, Awaits the durable
//     write). The call waits for the event, then for its Pendings, and
//     only then replies with the interfaces, routes and reservation of the
//     event: an acknowledged address is durable. The request's confirms
//     is AddPod.Confirms (the client will Confirm; IPAM reserves only
//     then). With a reservation (AddPod.Reservation, filled by IPAM) the
//     addresses expire at IPAM's deadline unless Confirm confirms them
//     (step 7). If the loop finds the pod recorded with another container
//     after all (a concurrent Add won), podmanager's Update fails with
//     errObsoletePod and the call deletes and pushes again (at most
//     maxObsoleteRounds rounds).
//  4. Delete: one DeletePod for the key (an unknown key is OK); a release
//     whose Pending fails is an ERROR (CodeInternal): it is not
//     acknowledged.
//  5. Check and Status read IPAM (Deps.IPAM) outside the loop: Check fails
//     with CodeCheckFailed when the key holds no address or, with prev_ips,
//     another one (compared without the prefix length); Status fails with
//     CodeNotAvailable when IPAM cannot allocate (not ready) or no address
//     is free.
//  6. GC: one GCPods for the network and its valid attachments.
//  7. Confirm: IPAM.ConfirmAttachment(key, reservation) under the call's
//     context, outside the loop (IPAM's own single writer orders it with
//     its allocations and expiries; no event is pushed). OK once the
//     confirmation is durable. A reservation that is not the key's
//     (expired, replaced by a later Add, never made) is IPAM's
//     ErrBadRequest: CodeBadRequest, and contiv-cni fails and rolls back
//     the ADD. A call whose context ended reports the cause
//     (requestTimeout, shutdown: CodeTryAgainLater); IPAM may still have
//     confirmed, and contiv-cni's rollback (Delete) releases the key
//     either way.
//  8. Errors become codes in one place (errorCode): ErrTryAgain, a
//     deadline, a closed or full event loop: CodeTryAgainLater;
//     ErrBadRequest: CodeBadRequest; ipalloc.ErrPoolExhausted:
//     CodePoolExhausted; anything else CodeInternal. The reply's text
//     names the method and the cause. The gRPC error is always nil.
//
// A call that timed out may still be processed by the loop later (an
// allocation can be made after the client gave up). Nothing was
// acknowledged: the runtime's retry of the same key gets the same address,
// and its DEL releases it; an address under a reservation that nobody
// confirms is released by IPAM at the deadline even without a DEL.
//
// # State and owners
//
//   - The local pods (podTable): owned by the event loop. Only
//     podmanager's Update (AddPod records, DeletePod and GCPods forget) and
//     Revert (undoes the AddPod that a later handler failed) change them;
//     GetLocalPods and the obsolete check of Add read copies under the
//     table's mutex. Resyncs keep them. With criSocket, AfterInit fills
//     the table from the runtime's ready sandboxes (adopt) before the
//     socket serves, so no event runs meanwhile; an adopted pod has no
//     attachments (its keys are IPAM's): a DEL of its container drops
//     it, and an Add of another container replaces it (IPAM releases the
//     old attachments as obsolete). Without criSocket, or when the
//     runtime does not answer then, the table starts empty and fills
//     with the next Adds.
//   - The runtime (criSocket): the CRI client (criRuntime, connected at
//     the first call that finds the runtime up, under its own mutex) is
//     used by AfterInit's adopt and by runtimeLoop, one goroutine started
//     by AfterInit and ended by Close, which lists the sandboxes every
//     criListPeriod and hands each list to IPAM (RuntimeWitness); IPAM
//     stamps when the list began and decides (keeper/runtime.go). Whether
//     the last list answered is under runtimeMu (logs) and in the gauge
//     contiv_podmanager_runtime_up.
//   - The config, metrics and the life context: set by Init, read-only
//     afterwards.
//   - The gRPC server and the socket: set by AfterInit, stopped by Close,
//     both under Plugin.mu. Each call runs on its own gRPC goroutine and
//     touches only its own event; the event's outputs are read after the
//     loop is done with it.
//   - The socket's open connections and the handshakes in progress:
//     limitListener, under its own mutex; a connection frees its slot when
//     gRPC (or Close) closes it.
//
// # Caller duties
//
//  1. Wire EventLoop (the controller, through a controller.LoopRef),
//     IPAM (for Check, Status and Confirm), Metrics and StatusCheck, and
//     register the plugin as an event handler after nodesync and before
//     ipam, so that the pod is recorded before IPAM allocates and a
//     failing IPAM reverts the record.
//  2. Let the agent call LoadConfig, Init, AfterInit (creates the socket)
//     and Close (removes it).
//  3. Handlers of AddPod, DeletePod and GCPods (IPAM) fill the outputs
//     (AddPod: Interfaces, Routes, and Reservation when the addresses
//     expire unless confirmed) and Await what the reply must wait for;
//     they wrap ErrTryAgain, ErrBadRequest or ipalloc.ErrPoolExhausted to
//     choose the code. IPAM.ConfirmAttachment wraps ErrBadRequest for a
//     reservation that is not the key's.
//  4. Call GetLocalPods from any goroutine.
//  5. With criSocket, IPAM implements RuntimeWitness: UseRuntime is
//     called from Init (before IPAM's keeper starts), LookAtRuntime from
//     runtimeLoop; without it the runtime is only listed (metrics).
//  6. An IPAM that implements FailureObserver hears every ADD and DEL
//     answered ERROR (CNIFailed, on the call's goroutine, before the
//     reply leaves: keep it quick); the agent's status page lists them.
//
// Health: StatusCheck hears init until the socket serves, ok while it
// does, error if serving stops early and after Close. Metrics:
// contiv_podmanager_requests_total{method,code},
// contiv_podmanager_request_duration_seconds{method},
// contiv_podmanager_open_connections (at most maxConnections) and
// contiv_podmanager_handshake_timeouts_total.
package podmanager
