// Package sim is a cluster simulation: N simulated nodes in one process,
// each running the agent's real code for its node, against a real
// 3-member etcd cluster on 127.0.0.1, with a simulated contiv-ksr that
// writes Nodes, pods (per-node layout) and the mirror marker as
// contiv-ksr does. `make sim` runs it at large N (cmd/sim); TestSmallCluster
// runs every scenario at N=8 and asserts the invariants.
//
// A node is the agent's plugins as cmd/contiv-agent wires them: its own
// etcd client (every member listed), its own bolt file, servicelabel
// (the node name), contivconf (ContivConf), nodesync (node ID claim,
// presence lease, ID kept in bolt), IPAM and the controller (event loop
// and DB watcher of this node's pods, NodeName set), started and stopped
// by infra/agent. Left out: the REST server, metrics, health and
// podmanager: the CNI socket is replaced by pushing podmanager's AddPod
// and DeletePod events into the node's loop, as podmanager does. A probe
// handler, last in every loop, notes when the node is first ready (a node
// ID and a pod subnet) and counts the pod changes it handled.
//
// Scenarios (each a function of a started Sim, used by the test and by
// cmd/sim): RunColdStart (every node at once), RunIdle, RunChurn (pod
// creations and deletions; latency from the etcd write to the
// KubeStateChange handled by the node's loop), RunReplace (a share of the
// nodes replaced per minute under new names), RunKill (the etcd leader
// SIGKILLed and restarted during a churn).
//
// # Owners
//
//   - A Sim belongs to the goroutine that started it: Start, the Run*
//     scenarios, AddNodes, StopNode and Close are called from it, one at a
//     time. Its node lists and the pending pod writes are guarded by
//     Sim.mu, which the nodes' probes take (podChange) from their loops.
//   - Each node's plugins belong to its agent.Agent; the probe runs on the
//     node's loop goroutine and only writes atomic counters and calls
//     podChange.
//   - RunChurn's workers share the churner's pods, counts and samples
//     under churner.mu; each pod is written by one worker at a time, which
//     waits for its node to handle a write before the next.
//   - The KSR's heartbeat goroutine only writes the marker; each etcd
//     Member's waiter goroutine only reaps its process.
//
// # Caller duties
//
//  1. Build etcd with `make kube-bins` (the binary of _cache/kube/<version>
//     or $KUBEBUILDER_ASSETS, as tests/cluster and etcdtest use).
//  2. Start a Sim in a directory of its own (its members' data and every
//     node's bolt file go there), run scenarios, then Close it: the nodes
//     stop, the members are killed (the kernel kills them too if this
//     process dies first).
//  3. Read figures as indicative: every node, the three members and the
//     simulated contiv-ksr share the machine's CPUs.
package sim
