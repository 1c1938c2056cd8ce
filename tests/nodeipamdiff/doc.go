// Package nodeipamdiff runs the same node sequences through Kubernetes'
// range allocator (k8s.io/kubernetes/pkg/controller/nodeipam/ipam) and
// through plugins/nodeipam, and checks that both hand every node the same
// CIDRs; the differences that are on purpose have their own tests, which
// say what differs and why. It is a module of its own so that the main
// module does not depend on k8s.io/kubernetes.
package nodeipamdiff
