#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from this module into the
# directory given as $1 (the Makefile passes _cache/kube/<version>), unless
# they are there already; with "node" as $2, kubelet, kube-scheduler and
# kube-controller-manager instead (what tests/node runs beside them). Only the first run pays (about 6 to 8 minutes on
# 2 cores with an empty Go cache); the directory is keyed by the versions
# pinned in go.mod, so a version bump builds into a new one.
set -euo pipefail
out=${1:?usage: build.sh <output dir> [kube|node]}
set=${2:-kube}
cd "$(dirname "$0")"
k8s=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
if [ "$(basename "$out")" != "$k8s-etcd${etcd#v}" ]; then
	echo "kubebin: $out is not named after the pinned versions $k8s-etcd${etcd#v}: update KUBE_VERSION in the Makefile" >&2
	exit 1
fi
minor=$(echo "$k8s" | cut -d. -f2)
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
mkdir -p "$out"
build() { # name package
	if [ -x "$out/$1" ]; then return; fi
	local start=$SECONDS
	go build -trimpath -ldflags "$ldflags" -o "$out/$1.tmp" "$2"
	mv "$out/$1.tmp" "$out/$1"
	echo "kubebin: built $1 in $((SECONDS - start)) s"
}
case $set in
kube)
	build etcd go.etcd.io/etcd/server/v3
	build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	build kubectl k8s.io/kubernetes/cmd/kubectl
	touch "$out/.complete"
	;;
node)
	# kubelet is built without cgo, as the feasibility study did; the
	# others share the apiserver's packages in the build cache.
	CGO_ENABLED=0 build kubelet k8s.io/kubernetes/cmd/kubelet
	build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
	build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
	touch "$out/.node-complete"
	;;
*)
	echo "kubebin: unknown set $set (kube or node)" >&2
	exit 1
	;;
esac
