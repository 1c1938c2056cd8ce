// Command demo (`make demo`) runs the whole system on this machine and
// shows what the agents make of a Kubernetes state: a kube-apiserver and
// its etcd (tests/kubeenv, the binaries of `make kube-bins`), the Contiv
// etcd, one contiv-ksr and two contiv-agents for the nodes demo-node-1
// and demo-node-2 (tests/cluster, the binaries of `make build` in -bin).
// It creates the two Nodes and four Pods with kubectl, gives each Pod a
// status.podIP in its node's pod subnet through the status subresource
// (there is no kubelet), and once both agents have learned their pods
// (POST /controller/resync, then GET /contiv/v1/ipam/allocations) prints
// each agent's /contiv/v1/ipam and allocations, where every REST endpoint
// and the kubeconfig are, and the PIDs it started. Then it waits: SIGINT
// (Ctrl-C) or SIGTERM stops every process it started, cleanly, and
// removes the data directory unless -dir named it.
//
// Output contract (tests/demo's test reads it): each REST answer is
// printed as a line "== <node>: GET <url>", the indented JSON, and an
// empty line; "data directory: <dir>" names the data; the line "ready:
// ..." comes once everything is printed; "stopped" comes last.
//
// Owner: the main goroutine owns the API server, the cluster and the
// data directory; the signal context is the only other actor, and it
// only cancels.
package main
