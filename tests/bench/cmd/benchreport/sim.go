package main

import "github.com/contiv-ipam/agent/tests/bench/report"

var simTable = report.Table{
	Bench:   "BenchmarkSim",
	Caption: "Simulated nodes on a 3-member etcd: cold start, idle, churn, a killed leader",
	Columns: []report.Column{
		{Header: "all ready s", Unit: "all-ready-s"},
		{Header: "node ready p50 s", Unit: "ready-p50-s"},
		{Header: "node ready p99 s", Unit: "ready-p99-s"},
		{Header: "agents restarted", Unit: "restarts"},
		{Header: "largest ID", Unit: "max-id"},
		{Header: "cold start CPU ms/node", Unit: "cold-cpu-ms/node"},
		{Header: "cold start etcd events", Unit: "cold-etcd-events"},
		{Header: "cold start etcd MiB sent", Unit: "cold-etcd-MiB"},
		{Header: "idle RSS MiB/node", Unit: "idle-MiB/node"},
		{Header: "idle heap MiB/node", Unit: "idle-heap-MiB/node"},
		{Header: "idle CPU ms/s/node", Unit: "idle-cpu-ms/s/node"},
		{Header: "pod change p50 ms", Unit: "change-p50-ms"},
		{Header: "pod change p99 ms", Unit: "change-p99-ms"},
		{Header: "etcd events per change", Unit: "events/change"},
		{Header: "etcd KiB per change", Unit: "etcd-KiB/change"},
		{Header: "leader killed: p99 ms", Unit: "kill-change-p99-ms"},
	},
	Plot: &report.Plot{Unit: "all-ready-s", YLabel: "cold start, every node ready (s)", Impls: []string{""}},
}

func simScenario() report.Scenario {
	return report.Scenario{
		ID:    "sim",
		Title: "A cluster simulation",
		Method: `tests/sim: N simulated nodes in one process, each the agent's real plugins (contivconf, nodesync,
IPAM, the controller with the DB watcher of its own node's pods) with its own etcd client and bolt
file, against a real 3-member etcd cluster on loopback; a simulated contiv-ksr writes the Nodes,
the pods under their nodes (the per-node layout) and the mirror marker every 10 s. Per size: every
node started at once (ready: a node ID and a pod subnet; an agent stopped by its start-up deadline
is restarted 10 s later, as kubelet would); 10 s idle; 1,000 pod creations and deletions at 50 per
second over random nodes (each create is written twice, scheduled then with its address, and its
CNI ADD goes through the node's loop); 500 more while the etcd leader is killed for 10 s. A pod
change's latency runs from its etcd write to the node's loop handling it; every node must see
exactly the changes under its own prefix and none of another node's, and every allocation must
agree with contiv-ksr's record (else the run fails). Events per change count every watch event
the members sent during the churn, the marker's heartbeat to every node included. CPU and RSS
are the process's, over N; the agents, the members and the benchmark share the machine's 2 cores,
so the cold start of the largest sizes measures the machine as much as the agent. No warm-up:
each size is one run on a fresh cluster. ` + "`make sim`" + ` runs larger sizes and more scenarios;
tests/sim/doc.go has the details.`,
		Run:    report.Command{Dir: ".", Args: []string{"-run", "^$", "-bench", "^BenchmarkSim$", "-benchtime", "1x", "-count", "1", "-timeout", "60m", "-v", "./tests/sim/"}},
		Tables: []report.Table{simTable},
	}
}
