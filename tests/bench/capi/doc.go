// Package capi measures how long our Cluster API IPAM provider
// (plugins/capi/pool, the code of cmd/contiv-capi-ipam) takes to serve
// 1,000 IPAddressClaims on one ContivIPPool: from the first create until
// every claim is Ready with an IPAddress (impl=contiv).
//
// Run it from tests/bench, after `make kube-bins` in the repository root:
//
//	go test -run '^$' -bench BenchmarkCAPIClaims -benchtime 1x ./capi/
//
// There is no peer row: the in-cluster provider
// (sigs.k8s.io/cluster-api-ipam-provider-in-cluster) is not served by the
// Go module proxy (its version list and @latest are refused), so it
// cannot be imported here.
//
// # One run
//
//  1. A fresh kube-apiserver and its etcd (tests/kubeenv) with the CRDs of
//     plugins/capi/api/crd and plugins/capi/api/crd/capi.
//  2. The provider: pool.Setup in a controller-runtime manager in this
//     process, 8 claim workers (contiv-capi-ipam's default
//     -max-concurrent-reconciles), no leader election, metrics and probes
//     off, logs dropped, controller name validation skipped (a second run
//     in the process would reuse the names). Its client: QPS 1000, burst
//     2000 (the qps= segment of the name).
//  3. A namespace and a ContivIPPool of 10.10.0.0/21 (2,045 addresses
//     after the network, broadcast and gateway), and a wait until the pool
//     controller has written its status: the provider is up.
//  4. A watch on the namespace's IPAddressClaims. When the API server
//     drops it (it closes a watcher that falls behind, which happens on a
//     busy 2-core machine), the claims are listed again and watched from
//     there; the benchmark logs how often.
//  5. The timer starts; 16 clients without client-side rate limit create
//     the claims at once (each names the pool in spec.poolRef).
//  6. The timer stops when the watch has seen every claim with condition
//     Ready=True and status.addressRef set.
//  7. The IPAddresses are listed: one per claim, the one its addressRef
//     names, for that claim, inside the pool and not the gateway, and no
//     address twice; otherwise the benchmark fails. Then the manager is
//     stopped; an error of its shutdown (it may overrun its grace period)
//     is logged, not failed on.
//
// # Figures (b.ReportMetric)
//
//   - s: seconds from step 5 to step 6; ms/claim: s in milliseconds over
//     the claims (the inverse of the throughput, not a claim's latency);
//     claims/s: the claims over s.
//   - writes/claim: the API requests that write (POST, PUT, PATCH,
//     DELETE) made by the provider's client while the timer ran, over the
//     claims; an http.RoundTripper wrapping that client counts them.
//
// ns/op covers the timed part only (steps 5 and 6).
package capi
