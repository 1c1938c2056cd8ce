// Package nodeipamdiff runs the same operations through Kubernetes' node
// IPAM (k8s.io/kubernetes/pkg/controller/nodeipam/ipam: the range
// allocator, and the ipam/sync NodeSync loop of the cloud modes) and
// through plugins/nodeipam, and checks that both do the same: the same
// CIDRs for every node, the same constructor verdicts, the same patches,
// cloud writes, warnings and errors in every sync mode. Every difference
// that is on purpose is named in a table (constructorDifferences,
// syncDifferences) or pinned by a subtest of TestDifferencesOnPurpose or
// TestSyncDifferencesOnPurpose that asserts both sides; a difference that
// is not named fails the tests, and so does a named one that is no longer
// met. It is a module of its own so that the main module does not depend
// on k8s.io/kubernetes.
package nodeipamdiff
