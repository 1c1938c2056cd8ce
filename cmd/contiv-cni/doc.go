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
// Two ways to use it (README.md has full examples):
//
//   - plugin mode: "type":"contiv-cni" in a conflist, "grpcServer" at the
//     top level; the full result (one interface, CNI_IFNAME in
//     CNI_NETNS). With an "ipam" section of another type, contiv-cni runs
//     that IPAM plugin itself (external IPAM delegation) and passes its
//     first address to the agent as ipam_type/ipam_data.
//   - IPAM mode: "ipam":{"type":"contiv-cni","grpcServer":...} under ptp,
//     bridge, macvlan or ipvlan; the abbreviated IPAM result.
//
// Mutable state: none that outlives a call. Each command runs through
// handler, which owns its invocation (the parsed config, one gRPC
// connection, the log file) and closes them before it returns. An ADD
// leaves nothing half-done: when the agent fails after a delegate's ADD,
// the delegate's DEL runs; when the agent acknowledged an ADD whose reply
// cannot be printed, the ADD is rolled back (agent Delete, delegate DEL).
//
// Duties of the caller (the runtime, or the plugin delegating IPAM):
//  1. set CNI_COMMAND, CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS and CNI_PATH
//     as the CNI spec says, and pass the network config on stdin;
//  2. retry a call that failed with code 11 (the agent is unreachable or
//     not ready; a DEL that failed so has NOT released the address);
//  3. pass prevResult on CHECK (its addresses are checked against the
//     agent's allocation).
//
// Every call to the agent or to a delegate runs under grpcTimeout
// (default 10s): no call hangs longer.
package main
