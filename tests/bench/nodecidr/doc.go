// Package nodecidr measures how long a node CIDR allocator takes to give
// a pod CIDR to each of 5,000 Nodes on a real API server: plugins/nodeipam's
// RangeAllocator (impl=contiv) against the range allocator of Kubernetes'
// kube-controller-manager, k8s.io/kubernetes/pkg/controller/nodeipam/ipam
// v1.36.3 (impl=k8s-range-allocator).
//
// Run it from tests/bench, after `make kube-bins` in the repository root:
//
//	go test -run '^$' -bench BenchmarkNodeCIDRs -benchtime 1x ./nodecidr/
//
// # One run, for each implementation
//
//  1. A fresh kube-apiserver and its etcd (tests/kubeenv): nothing is
//     shared between the implementations or between runs.
//  2. The Nodes are created without pod CIDRs by 16 clients at once,
//     with no client-side rate limit, before any allocator exists.
//  3. A watch on the Nodes starts from a list. When the API server drops
//     it (it closes a watcher that falls behind, which happens on a busy
//     2-core machine), the Nodes are listed again and watched from there;
//     the benchmark logs how often.
//  4. Only for contiv, untimed: an embedded etcd (the etcd plugin's
//     embedded mode, fsync on, data in a temporary directory) and a won
//     election, as contiv-ksr's leader has them before it starts the
//     allocator.
//  5. The timer starts, and the allocator starts the way its host runs
//     it, with a shared informer factory on the allocator's client, not
//     started before: for contiv as contiv-ksr's leader does
//     (nodeipam.New, which lists the Nodes and reads the claims, then
//     Run; its claims go to the embedded etcd through an EtcdLedger fenced
//     by the leadership); for Kubernetes as kube-controller-manager's node
//     IPAM controller does (ipam.New with RangeAllocatorType, which lists
//     the Nodes and calls NewCIDRRangeAllocator, then Run).
//  6. The timer stops when the watch has seen every Node with a pod CIDR.
//  7. The allocator is stopped, and the Nodes are listed: each must hold
//     one /24 of the cluster range, and no two the same; otherwise the
//     benchmark fails.
//
// # What is the same for both
//
//   - Cluster range 10.0.0.0/8, a /24 per Node (65,536 blocks), no service
//     range.
//   - The allocator's client: QPS 1000, burst 2000 (the qps= segment of
//     the name), JSON, so that the allocators rather than client-go's rate
//     limiter set the pace (kube-controller-manager's default, 20/30,
//     would make each run take over four minutes).
//   - 30 workers: Kubernetes' cidrUpdateWorkers, a constant; ours is
//     Config.Workers, set to 30 here (contiv-ksr's default is 10).
//   - Logs are dropped without being formatted (klog's logger from the
//     context is logr.Discard; ours is slog.DiscardHandler): both log
//     every patch at Info.
//   - Both start with a cold informer. contiv-ksr in fact campaigns only
//     after its informers have synced, so its real start is faster by the
//     informer's list; kube-controller-manager starts its informers after
//     it is elected. Cold for both measures the same work.
//
// # Figures (b.ReportMetric)
//
//   - s: seconds from step 5 to step 6; nodes/s: Nodes over s.
//   - writes/node: the API requests that write (POST, PUT, PATCH, DELETE)
//     made by the allocator's client from its start until it stopped, over
//     the Nodes; an http.RoundTripper wrapping that client counts them.
//     Both patch each Node once; Events would count too.
//   - claim-writes/node: the writes of the allocator's own ledger in its
//     own etcd (contiv: a fenced put of the claim before the patch and a
//     delete after it; Kubernetes has no ledger: 0).
//
// ns/op covers the timed part only (steps 5 and 6).
package nodecidr
