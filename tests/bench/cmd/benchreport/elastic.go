package main

import (
	"github.com/contiv-ipam/agent/tests/bench/report"
)

var elasticTable = report.Table{
	Bench: "BenchmarkElasticGrowth", ImplKey: "impl",
	Caption: "A node outgrowing its /28 under 8 paced CNI clients: warm-target crossing to usable block, and Add p99",
	Columns: []report.Column{
		{Header: "crossing → claim written ms", Impl: "contiv", Unit: "claim-ms"},
		{Header: "crossing → block usable ms", Impl: "contiv", Unit: "usable-ms"},
		{Header: "blocks added", Impl: "contiv", Unit: "blocks-added"},
		{Header: "Add p99 growing ms", Impl: "contiv", Unit: "growth-p99-ms"},
		{Header: "Add p99 steady ms", Impl: "contiv", Unit: "steady-p99-ms"},
		{Header: "growing ÷ steady (p99)", Impl: "contiv", Unit: "growth-over-steady-p99"},
	},
}

func elasticScenario() report.Scenario {
	return report.Scenario{
		ID:    "elastic",
		Title: "Elastic pools: growth",
		Method: `Real processes (tests/elastic): a kube-apiserver, the Contiv etcd, contiv-ksr with poolBlocks
(10.200.0.0/20 in /28 blocks) and one contiv-agent whose pod subnet is a /28, with warmTarget 4,
addressCooldown 1s, blockCooldown 3s. 8 gRPC CNI clients add 60 containers, each client waiting
100 ms after each Add (starts spread evenly: about 80 Adds/s), so the node outgrows its subnet four or
five times. Per warm-target crossing, the agent's log gives the time from the crossing to the claim
written to etcd and to the granted block added to its pools (usable: the next Add can get an
address of it); each run reports the median over its crossings, each cell the median of the runs. Then every container is
deleted, the address cooldown is waited out and 60 are added again the same way into the blocks
already held (steady state, no crossing). The p99 is over the 60 Adds of a phase (nearly their
maximum). No warm-up: each run is a fresh cluster. tests/elastic/README.md has the details.`,
		Run:    bench(".", "./tests/elastic/", "BenchmarkElasticGrowth", "1x", 3),
		Tables: []report.Table{elasticTable},
		Notes: `Unpaced, the same 8 clients outrun the grant: an Add that arrives while a claim is pending and
the node's blocks are full is answered "try again later" (code 11), which contiv-cni repeats for up
to 2 s, so that it succeeds once the block is added (TestElasticBurstOutrunsTheGrant).`,
	}
}
