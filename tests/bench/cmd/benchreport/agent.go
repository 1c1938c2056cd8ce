package main

import (
	"strings"

	"github.com/contiv-ipam/agent/tests/bench/report"
)

var floorSyncTable = report.Table{
	Bench:   "BenchmarkFdatasync",
	Caption: "One 4 KiB write and its fdatasync (ms)",
	Columns: []report.Column{{Header: "p50", Unit: "p50-ms"}, {Header: "p99", Unit: "p99-ms"}},
}

func fsyncScenario() report.Scenario {
	return report.Scenario{
		ID:    "fsync",
		Title: "The disk's floor",
		Method: `What bounds a durable allocation on this machine: one 4 KiB write and its fdatasync, in a file in
the temporary directory the benchmarks' agents keep their bolt file in. A bolt commit makes two
(the data pages, then the meta page), so a durable allocation cannot be acknowledged in less than
about twice this p50. p50 and p99 are over the ops of one run.`,
		Run:    bench("tests/bench", "./floor/", "^BenchmarkFdatasync$", "3000x", 1),
		Tables: []report.Table{floorSyncTable},
	}
}

var durableTable = report.Table{
	Bench:   "BenchmarkGRPCAdd",
	Caption: "Durable allocations through the agent's gRPC API",
	Columns: []report.Column{
		{Header: "allocations/s", Unit: "adds/s"},
		{Header: "p50 ms", Unit: "p50-ms"},
		{Header: "p99 ms", Unit: "p99-ms"},
	},
	Plot: &report.Plot{Unit: "adds/s", YLabel: "durable allocations per second", Impls: []string{""}},
}

func durableScenario() report.Scenario {
	return report.Scenario{
		ID:    "durable",
		Title: "Durable allocations through gRPC",
		Method: `The real agent (cmd/contiv-agent, embedded etcd, bolt in a temp dir) and 1, 16 or 64 callers,
one gRPC connection each over the agent's unix socket (as many contiv-cni processes would hold),
sharing the round's Adds of distinct keys. An Add returns once its record is durable in bolt
(fsync; concurrent Adds share one commit). allocations/s is the round's Adds over its wall time;
p50 and p99 are over every call of the round. The keys are deleted after each round, timer
stopped. Warm-up: the agent is started and every connection makes one call (a DEL of an unknown
key) before the timer starts, and go test's first call of each sub-benchmark (b.N = 1) is untimed by
the report (only the -benchtime rounds are printed). Each cell is the median of the runs.
tests/cnibench/README.md has the details.`,
		Run:    bench(".", "./tests/cnibench/", "^BenchmarkGRPCAdd$", "5000x", 5),
		Tables: []report.Table{durableTable},
		Targets: []report.Target{
			{Text: "16 callers: allocations per second", Unit: "/s", Limit: 5000,
				Value: cell(durableTable, "callers=16", "", "adds/s"),
				Bound: "Little's law: 16 callers always in flight at p50 latency L give at most 16/L per second, so this follows the p50 below."},
			{Text: "16 callers: p50 latency", Unit: "ms", Limit: 1, Max: true,
				Value: cell(durableTable, "callers=16", "", "p50-ms"),
				Bound: "An Add crosses the gRPC server, the event loop and the IPAM keeper, then waits for the bolt commit it joins (two fdatasyncs: see the disk's floor) and, with 16 callers on 2 cores shared with the callers themselves, for the commit before it."},
		},
	}
}

var stackTable = report.Table{
	Bench: "BenchmarkGRPCAddStack", ImplKey: "stack",
	Caption: "Durable ADDs through the agent's gRPC API at 16 callers, by stack",
	Columns: []report.Column{
		{Header: "single: allocations/s", Impl: "single", Unit: "adds/s"},
		{Header: "dual: allocations/s", Impl: "dual", Unit: "adds/s"},
		{Header: "dual+confirm: ADDs/s", Impl: "dual+confirm", Unit: "adds/s"},
		{Header: "single p50 ms", Impl: "single", Unit: "p50-ms"},
		{Header: "dual p50 ms", Impl: "dual", Unit: "p50-ms"},
		{Header: "dual+confirm p50 ms", Impl: "dual+confirm", Unit: "p50-ms"},
		{Header: "single p99 ms", Impl: "single", Unit: "p99-ms"},
		{Header: "dual p99 ms", Impl: "dual", Unit: "p99-ms"},
		{Header: "dual+confirm p99 ms", Impl: "dual+confirm", Unit: "p99-ms"},
		{Header: "single ÷ dual (allocations/s)", Impl: "single", Over: "dual", Unit: "adds/s"},
	},
}

func stackScenario() report.Scenario {
	return report.Scenario{
		ID:    "dualstack",
		Title: "Dual-stack ADDs through gRPC",
		Method: `As the durable scenario at 16 callers, with a fresh agent per row: a single-stack node (IPv4
/16), a dual-stack node (the same IPv4 /16 and an IPv6 /112: one address per family, both in one
record and one commit), and the dual-stack ADD as contiv-cni makes it: an Add that asks for an
expiring reservation, then its Confirm, each durable (two records written per ADD, in the batches
of the callers around it). Every reply is checked to hold one interface. allocations/s is the
round's ADDs over its wall time; p50 and p99 are over every ADD (Add and Confirm together for
dual+confirm). Keys are not deleted between runs (each run has its own agent). Each cell is the
median of the runs.`,
		Run:    bench(".", "./tests/cnibench/", "^BenchmarkGRPCAddStack$", "3000x", 5),
		Tables: []report.Table{stackTable},
		Targets: []report.Target{
			{Text: "A dual-stack Add costs at most 1.25x a single-stack one (allocations/s)", Unit: "x", Limit: 1.25, Max: true,
				Value: ratio(stackTable, "", "single", "dual", "adds/s"),
				Bound: "The second family is one more next-fit step and a longer record in the same commit; the commit (two fdatasyncs) dominates."},
		},
	}
}

var cniTable = report.Table{
	Bench: "BenchmarkCNIToolAdd", ImplKey: "plugin",
	Caption: "CNI ADD through cnitool, by allocations already held (ms)",
	Columns: []report.Column{
		{Header: "contiv-cni p50", Impl: "contiv-cni", Unit: "p50-ms"},
		{Header: "host-local p50", Impl: "host-local", Unit: "p50-ms"},
		{Header: "exec floor p50", Impl: "contiv-cni", Unit: "floor-p50-ms"},
		{Header: "contiv-cni over the floor", Impl: "contiv-cni", Unit: "over-floor-p50-ms"},
		{Header: "host-local over the floor", Impl: "host-local", Unit: "over-floor-p50-ms"},
		{Header: "contiv-cni p99", Impl: "contiv-cni", Unit: "p99-ms"},
		{Header: "host-local p99", Impl: "host-local", Unit: "p99-ms"},
		{Header: "host-local ÷ contiv-cni (p50)", Impl: "host-local", Over: "contiv-cni", Unit: "p50-ms"},
	},
	Plot: &report.Plot{Unit: "p50-ms", YLabel: "ADD p50 (ms)", Impls: []string{"contiv-cni", "host-local"}},
}

var floorTable = report.Table{
	Bench:   "BenchmarkCNIToolFloor",
	Caption: "The exec floor alone: cnitool running a plugin that prints a fixed result (ms)",
	Columns: []report.Column{{Header: "p50", Unit: "p50-ms"}, {Header: "p99", Unit: "p99-ms"}},
}

func cniScenario() report.Scenario {
	var targets []report.Target
	for _, n := range []string{"0", "1000", "4000"} {
		targets = append(targets, report.Target{
			Text: "ADD at " + n + " existing: contiv-cni over the exec floor (p50)", Unit: "ms", Limit: 1.5, Max: true,
			Value: cell(cniTable, "existing="+n, "contiv-cni", "over-floor-p50-ms"),
			Bound: "Three costs, measured apart: contiv-cni starts about 1.5 ms slower than the floor plugin (a static 16 MB binary whose Go runtime and grpc/protobuf package init run before main: 2.6 ms against 1.1 ms for a trivial binary), its first gRPC call on a fresh connection in a cold process takes about 1.5 to 2 ms (0.6 ms warm), and the agent's durable Add about 0.6 ms (see the durable scenario at 1 caller). A runtime that execs a plugin per pod pays the first two whatever the IPAM does; host-local pays less to start and then walks its lease files."})
	}
	targets = append(targets, report.Target{
		Text: "ADD at 0 existing: contiv-cni ÷ host-local (p50)", Unit: "×", Limit: 1, Max: true,
		Value: ratio(cniTable, "existing=0", "contiv-cni", "host-local", "p50-ms"),
		Bound: "Of a direct exec of one ADD (about 6.5 ms, the floor plugin 1.6): 2.6 ms until main, of which package init is 1.4 ms, almost all grpc-go's import graph (protobuf, grpc, crypto, x/net, OpenTelemetry through the CNI library's invoke); 0.85 ms to connect (grpc-go waits for the server's settings); the agent's two durable writes, Add and Confirm, about 1.6 ms; host-local starts a small binary and writes one lease file. GOMAXPROCS 1, the discard log handler and the dial options took 0.3-0.5 ms off; a gRPC client smaller than grpc-go, or one durable write per ADD, is what is left."})
	targets = append(targets, report.Target{
		Text: "flat in n: contiv-cni p50 at 4,000 ÷ at 0", Unit: "×", Limit: 1.2, Max: true,
		Value: func(s *report.Set) (float64, bool) {
			a, ok1 := cniTable.Cell(s, "existing=4000", "contiv-cni", "p50-ms")
			b, ok2 := cniTable.Cell(s, "existing=0", "contiv-cni", "p50-ms")
			return a / b, ok1 && ok2 && b > 0
		},
		Bound: "Process start times on a shared machine vary by more than the allocation itself costs."})
	return report.Scenario{
		ID:    "cni",
		Title: "CNI ADD through cnitool",
		Method: `One ` + "`cnitool add`" + ` exec per ADD, as a container runtime pays it: contiv-cni (plugin mode, through
the real agent) and Debian's host-local (containernetworking-plugins 1.1.1) in the same run, at
cniVersion 1.0.0, with 0, 1,000 and 4,000 allocations already held (gRPC Adds for contiv, lease
files for host-local). Each measured ADD is paired with one ADD of the floor plugin (a Go plugin that
only decodes its config and prints a fixed result), timer stopped, so that both see the same load;
"over the floor" is the p50 minus the floor's p50. The ADDs of a round are undone after it. Warm-up:
the agent runs and the existing allocations are in place before the timer starts; go test's b.N = 1
call precedes each printed round. Each cell is the median of the runs' p50 (or p99) over -benchtime
ADDs.`,
		Run:     bench(".", "./tests/cnibench/", "^BenchmarkCNITool(Add|Floor)$", "200x", 3),
		Tables:  []report.Table{cniTable, floorTable},
		Targets: targets,
	}
}

var resyncTable = report.Table{
	Bench:   "BenchmarkResync",
	Caption: "Resync in process: 100,000 pods over 5,000 nodes, 250 on this node",
	Columns: []report.Column{
		{Header: "ms", Unit: "ms"},
		{Header: "bytes allocated", Unit: "B/op"},
		{Header: "allocs", Unit: "allocs/op"},
	},
}

var restartTable = report.Table{
	Bench:   "BenchmarkAgentRestart",
	Caption: "The agent restarted on a state (end to end)",
	Columns: []report.Column{
		{Header: "start to ready ms", Unit: "ms"},
		{Header: "DB watcher list+decode+mirror ms", Unit: "list-ms"},
		{Header: "DB resync event ms", Unit: "resync-ms"},
		{Header: "peak RSS MiB", Unit: "MiB"},
		{Header: "idle RSS MiB", Unit: "idle-MiB"},
		{Header: "first start (cold mirror) ms", Unit: "cold-mirror-ms"},
		{Header: "first start peak RSS MiB", Unit: "cold-MiB"},
	},
}

// The rows of the restart table: the big state in the per-node layout
// (contiv-ksr's default), the same in the cluster layout, a small state.
const (
	restartBig        = "etcd=external,pods=100000,nodes=5000,layout=node"
	restartBigCluster = "etcd=external,pods=100000,nodes=5000,layout=cluster"
	restartSmall      = "etcd=external,pods=1000,nodes=4,layout=node"
)

// restartRatio is the start to ready of the big state over the small one's.
func restartRatio(s *report.Set) (float64, bool) {
	big, ok1 := restartTable.Cell(s, restartBig, "", "ms")
	small, ok2 := restartTable.Cell(s, restartSmall, "", "ms")
	if !ok1 || !ok2 || small == 0 {
		return 0, false
	}
	return big / small, true
}

func resyncScenario() report.Scenario {
	return report.Scenario{
		ID:    "resync",
		Title: "Resync of a big Kubernetes state",
		Method: `A Kubernetes state of 100,000 pods over 5,000 nodes (5,000 Nodes and 4,999 other node ID records),
250 of the pods on this node, whose allocations the agent made before a restart and keeps in bolt;
the state is written with the real models and keys, as contiv-ksr writes them: in its per-node
layout (the default; the agent lists and watches its own node's pods, every node's records and
three keys) and, for comparison, in the cluster layout (every agent reads every pod, Contiv's);
and a small state of 1,000 pods over 4 nodes, 250 on this node. In process (per-node layout):
stage=ipam is the IPAM plugin's first resync after a restart, given every pod of the state (the
"rebuild IPAM" of the target); stage=decode is the decoding of every value of the state;
stage=watcher is the DB watcher from start to the resync it pushes, with the agent's prefixes
(list from an etcd server in the process, decode, the bolt mirror). End to end: the real agent
binary restarted on an etcd server that holds the state (exec to /readiness 200); peak RSS is the
largest VmHWM over the runs; idle RSS is the VmRSS 5 s after one more start, idle, of the agent
as the image holds it (make static: without the embedded etcd server). Warm-up: the
in-process stages run one untimed op first (which also fills the bolt mirror); the restart's
first start, which mirrors the state into bolt, is reported apart (cold mirror). Each figure is
the mean of -benchtime ops. tests/bench/resync/doc.go has the details.`,
		Run:    bench("tests/bench", "./resync/", ".", "3x", 1),
		Tables: []report.Table{resyncTable, restartTable},
		Targets: []report.Target{
			{Text: "IPAM resync of 100,000 pods", Unit: "ms", Limit: 200, Max: true,
				Value: cell(resyncTable, "stage=ipam", "", "ms"),
				Bound: "The IPAM resync walks every pod of the state it is given (sort, map of the pods in Kubernetes); in the per-node layout an agent is given its own node's."},
			{Text: "agent restart on 100,000 pods over 5,000 nodes (per-node layout), start to ready", Unit: "ms", Limit: 200, Max: true,
				Value: cell(restartTable, restartBig, "", "ms"),
				Bound: "What is left is the cluster's nodes: the 5,000 Nodes and 4,999 ID records every agent reads (list in pages, protojson decode at about 3 µs a record, the state, the mirror: the list+decode+mirror column) and nodesync's resync of 5,000 nodes (the DB resync column), on 2 cores shared with the etcd server of the benchmark."},
			{Text: "agent peak RSS on 100,000 pods over 5,000 nodes (per-node layout)", Unit: "MiB", Limit: 64, Max: true,
				Value: cell(restartTable, restartBig, "", "MiB")},
			{Text: "start to ready: 100,000 pods over 5,000 nodes ÷ 1,000 pods over 4 nodes", Unit: "×", Limit: 1.2, Max: true,
				Value: restartRatio,
				Bound: "The agent's own pods are the same 250 in both; the difference is the cluster's 5,000 Nodes and ID records, which every agent reads (nodesync keeps every node's addresses)."},
			{Text: "agent idle RSS, as the image builds it (1,000 pods over 4 nodes)", Unit: "MiB", Limit: 32, Max: true,
				Value: cell(restartTable, restartSmall, "", "idle-MiB"),
				Bound: "About 19 MiB of it are the binary's own pages (text, pclntab, rodata) mapped from its file and touched by package init (grpc, the etcd client, protobuf, prometheus); the Go heap is about 5 MiB."},
		},
	}
}

var nodeIDTable = report.Table{
	Bench:   "BenchmarkNodeIDs",
	Caption: "Nodes claim their IDs from one etcd",
	Columns: []report.Column{
		{Header: "total s", Unit: "s"},
		{Header: "IDs/s", Unit: "ids/s"},
		{Header: "conflicts", Unit: "conflicts"},
		{Header: "listings", Unit: "listings"},
		{Header: "keys listed", Unit: "keys-listed"},
		{Header: "retries", Unit: "retries"},
		{Header: "gave up", Unit: "gave-up"},
		{Header: "largest ID", Unit: "max-id"},
	},
}

// nodeIDs5000 is a figure of the 5,000-client row (the first one, as the
// benchmark prints them), in unit.
func nodeIDs5000(unit string) func(s *report.Set) (float64, bool) {
	return func(s *report.Set) (float64, bool) {
		for _, n := range s.Names("BenchmarkNodeIDs") {
			if strings.HasPrefix(n, "BenchmarkNodeIDs/clients=5000/") || n == "BenchmarkNodeIDs/clients=5000" {
				return s.Median(n, unit)
			}
		}
		return 0, false
	}
}

// listingsPerNode5000 is the listings of the 5,000-client row per node.
func listingsPerNode5000(s *report.Set) (float64, bool) {
	v, ok := nodeIDs5000("listings")(s)
	return v / 5000, ok
}

func nodeIDScenario() report.Scenario {
	return report.Scenario{
		ID:    "nodeids",
		Title: "Node IDs",
		Method: `Real nodesync plugins, each with its own etcd connection, claim node IDs from one etcd server in
the benchmark process through their first resync; every ID must be unique and every node must get
one (a duplicate, a node left without an ID or a record naming the wrong node fails the
benchmark). conflicts counts the claims that lost a race and tried again, listings the reads of
the ID records (a new node lists once, to find a record an older agent wrote without its index;
a lost race lists nothing), keys listed the records those listings read, retries the claims
tried again after an error of etcd (a request over its timeout). No warm-up: a claim happens once
in a node's life, so each op is a fresh etcd keyspace and fresh clients. tests/bench/nodeids/doc.go has the details.`,
		Run:    bench("tests/bench", "./nodeids/", ".", "1x", 1),
		Tables: []report.Table{nodeIDTable},
		Targets: []report.Target{
			{Text: "5,000 node IDs", Unit: "s", Limit: 10, Max: true, Value: nodeIDs5000("s"),
				Bound: "A new node still lists the ID records once (the records of agents older than the per-name index are found only that way), and 5,000 listings of a store that fills meanwhile read millions of records on 2 cores shared with the etcd server; a request over etcd's operation timeout is retried (the retries column)."},
			{Text: "5,000 node IDs: listings per node", Unit: "listings", Limit: 2, Max: true, Value: listingsPerNode5000},
		},
	}
}

var startupTable = report.Table{
	Bench:   "BenchmarkStartToReady",
	Caption: "Agent start to /readiness 200 (ms)",
	Columns: []report.Column{{Header: "p50", Unit: "p50-ms"}, {Header: "p99", Unit: "p99-ms"}},
	Plot:    &report.Plot{Unit: "p50-ms", YLabel: "start to ready p50 (ms)", Impls: []string{""}},
}

func startupScenario() report.Scenario {
	return report.Scenario{
		ID:    "startup",
		Title: "Start to ready",
		Method: `The agent binary exec'd with a fresh data directory until GET /readiness answers 200, with the
embedded etcd and with an external etcd server on loopback (in the benchmark process, without
fsync). Each start is fresh (new data directory, new node name); /readiness is polled every 2 ms
once the agent's log names its REST port. p50 and p99 are over the starts of one run; no warm-up
beyond building the binary (a start is what is measured, caches of earlier starts included).
tests/bench/startup/doc.go has the details.`,
		Run:    bench("tests/bench", "./startup/", ".", "20x", 1),
		Tables: []report.Table{startupTable},
		Targets: []report.Target{{Text: "start to ready with the embedded etcd (p50)", Unit: "ms", Limit: 300, Max: true,
			Value: cell(startupTable, "etcd=embedded", "", "p50-ms")}},
	}
}
