//go:build tools

// Package kubebin pins the Kubernetes and etcd servers the tests run:
// kube-apiserver and kubectl of k8s.io/kubernetes, and the etcd server;
// for the real node (tests/node) also kubelet, kube-scheduler and
// kube-controller-manager. `make kube-bins` and `make node-bins` build them
// into _cache/kube/<version>/; nothing here is imported by the agent.
package kubebin

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
