package main

import (
	"github.com/contiv-ipam/agent/tests/bench/report"
)

var nodeCIDRTable = report.Table{
	Bench: "BenchmarkNodeCIDRs", ImplKey: "impl",
	Caption: "5,000 Nodes get their pod CIDRs on a real API server",
	Columns: []report.Column{
		{Header: "contiv s", Impl: "contiv", Unit: "s"},
		{Header: "k8s RangeAllocator s", Impl: "k8s-range-allocator", Unit: "s"},
		{Header: "k8s ÷ contiv", Impl: "k8s-range-allocator", Over: "contiv", Unit: "s"},
		{Header: "contiv writes/node", Impl: "contiv", Unit: "writes/node"},
		{Header: "k8s writes/node", Impl: "k8s-range-allocator", Unit: "writes/node"},
		{Header: "contiv claim writes/node", Impl: "contiv", Unit: "claim-writes/node"},
	},
	Plot: &report.Plot{Unit: "s", YLabel: "seconds until every Node has a CIDR", Impls: []string{"contiv", "k8s-range-allocator"}},
}

func nodeCIDRScenario() report.Scenario {
	return report.Scenario{
		ID:    "nodecidr",
		Title: "Node CIDRs",
		Method: `5,000 Nodes without a pod CIDR on a real kube-apiserver (tests/kubeenv), then the allocator starts;
timed until every Node has its CIDR. Ours is plugins/nodeipam's RangeAllocator as contiv-ksr's leader
runs it; the peer is Kubernetes' range allocator (k8s.io/kubernetes/pkg/controller/nodeipam/ipam)
as kube-controller-manager runs it. Both get 10.0.0.0/8 in /24s, a client rate limit of 1,000
requests/s (burst 2,000) and 30 workers, each on a fresh API server with the Nodes created before the
allocator exists (informers cold for both). Ours also writes each claim to an etcd (fenced, fsync on)
before the patch and deletes it after: the claims that make a failover safe; concurrent workers'
claims share transactions. writes/node counts API writes; claim writes are etcd writes. No
warm-up: each run is a fresh API server and a cold start of the allocator. Each cell is the median of
the runs. tests/bench/nodecidr/doc.go has the details.`,
		Run:    bench("tests/bench", "./nodecidr/", ".", "1x", 3),
		Tables: []report.Table{nodeCIDRTable},
	}
}

var capiTable = report.Table{
	Bench: "BenchmarkCAPIClaims", ImplKey: "impl",
	Caption: "1,000 IPAddressClaims to Ready",
	Columns: []report.Column{
		{Header: "total s", Impl: "contiv", Unit: "s"},
		{Header: "ms per claim", Impl: "contiv", Unit: "ms/claim"},
		{Header: "claims/s", Impl: "contiv", Unit: "claims/s"},
		{Header: "API writes/claim", Impl: "contiv", Unit: "writes/claim"},
	},
}

func capiScenario() report.Scenario {
	return report.Scenario{
		ID:    "capi",
		Title: "Cluster API claims",
		Method: `Our Cluster API IPAM provider (plugins/capi/pool in a controller-runtime manager) against a real
kube-apiserver: 1,000 IPAddressClaims on one ContivIPPool, timed from their creation until every one
is Ready with its IPAddress, created by 16 clients at once; 8 workers (the binary's default) and a
client rate limit of 1,000 requests/s (the binary's default, -kube-api-qps, is 50: at about 3.4 API
writes per claim that is some 70 s for 1,000 claims). ms per claim is the total over the claims
(the inverse of the throughput), not one claim's latency. No peer: the in-cluster provider
(sigs.k8s.io/cluster-api-ipam-provider-in-cluster) is not served by the Go module proxy here. No
warm-up: each run is a fresh API server and manager. Each cell is the median of the runs.
tests/bench/capi/doc.go has the details.`,
		Run:    bench("tests/bench", "./capi/", ".", "1x", 3),
		Tables: []report.Table{capiTable},
	}
}
