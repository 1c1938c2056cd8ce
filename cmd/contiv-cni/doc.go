// Command contiv-cni is the CNI plugin of the agent: the container runtime
// (or ptp, bridge, macvlan, ipvlan for their IPAM) executes it once per
// CNI call, and it forwards the call over gRPC (RemoteCNI, see
// plugins/podmanager/cni) to the agent's unix socket.
//
// The CNI protocol (environment, stdin, version negotiation, result and
// error printing) is entirely the CNI project's skel, types and version
// packages; this command adds only the config, the requests and the
// replies.
//
// Two ways to use it (docs/cni.md, "Two ways to use it", has full
// examples):
//
//   - plugin mode: "type":"contiv-cni" in a conflist, "grpcServer" at the
//     top level; the full result (one interface, CNI_IFNAME in
//     CNI_NETNS, every address on it: ips[].interface 0). With an "ipam"
//     section of another type, contiv-cni runs that IPAM plugin itself
//     (external IPAM delegation) and passes its addresses to the agent as
//     ipam_type/ipam_data: one IPConfig object for one address, an array
//     of them for several (dual-stack; see cni.proto).
//   - IPAM mode: "ipam":{"type":"contiv-cni","grpcServer":...} under ptp,
//     bridge, macvlan or ipvlan; the abbreviated IPAM result.
//
// Results carry every address of the agent's reply in its order
// (dual-stack: an IPv4 and an IPv6 address, each with the gateway of its
// family) and every route (0.0.0.0/0 via the IPv4 gateway, ::/0 via the
// IPv6 one), in each supported version (SupportedVersions: 0.3.1, 0.4.0,
// 1.0.0, 1.1.0; before 1.0.0 each address has "version" "4" or "6").
//
// Mutable state: none that outlives a call. Each command runs through
// handler, which owns its invocation (the parsed config, one gRPC
// connection, the log file) and closes them before it returns.
//
// An ADD, step by step:
//  1. plugin mode with a delegate: the delegate's ADD; its addresses
//     become ipam_data;
//  2. the agent's Add, with confirms set: contiv-cni promises to confirm
//     a reservation (when it fails: the delegate's DEL, and the agent's
//     error);
//  3. the result is built from the reply and converted to the call's
//     version;
//  4. when the reply has a reservation: the agent's Confirm for the
//     call's key and that reservation (a reply without one, from an agent
//     without expiring reservations, is not confirmed);
//  5. the result is printed.
//
// Nothing is left half-done: when step 3, 4 or 5 fails, the ADD is rolled
// back (agent Delete, then the delegate's DEL) and fails; a failed Confirm
// fails it with the agent's code and message (102: the reservation
// expired or was replaced; 11: not ready or unreachable). A result on
// stdout therefore never holds addresses that can still expire.
//
// When contiv-cni (or the runtime) dies mid-ADD: before step 4, the
// agent's addresses stay reserved only until the reservation's deadline,
// then the agent releases them itself (the delegate's lease, if any, is
// released by the runtime's DEL); after step 4, the addresses are
// confirmed and the runtime, which got no result, releases them with its
// DEL after the failed ADD (or GC, with 1.1.0).
//
// Duties of the caller (the runtime, or the plugin delegating IPAM):
//  1. set CNI_COMMAND, CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS and CNI_PATH
//     as the CNI spec says, and pass the network config on stdin;
//  2. retry a call that failed with code 11 (the agent is unreachable or
//     not ready; a DEL that failed so has NOT released the address), and
//     run DEL after an ADD that failed, as the CNI spec says;
//  3. pass prevResult on CHECK (its addresses are checked against the
//     agent's allocation).
//
// Every call to the agent or to a delegate runs under grpcTimeout
// (default 10s): no call hangs longer.
package main
