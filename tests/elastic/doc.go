// Package elastic tests the elastic pools of issue 16 end to end on real
// processes (tests/cluster): a kube-apiserver (tests/kubeenv), the Contiv
// etcd, contiv-ksr with the pool block server on (poolBlocks in ksr.conf,
// which tests/cluster's AddKSR does not write, so this package starts
// contiv-ksr itself) and one contiv-agent whose pod subnet is a /28, so
// that a few dozen CNI Adds on its gRPC socket outgrow it.
//
// Everything is in _test files: the growth and shrink scenario, the crash
// scenario (agent and contiv-ksr SIGKILLed mid-growth, checked with
// tests/crash's Ledger), the mid-shrink crash scenario (the agent
// SIGKILLed just after it gave back a block, contiv-ksr while a release
// is pending: shrink_crash_test.go) and BenchmarkElasticGrowth (benchreport's
// "elastic" scenario).
package elastic
