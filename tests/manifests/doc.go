// Package manifests keeps the deployment honest: k8s/ (the kustomization
// `kubectl apply -k k8s/` deploys), docker/ (the images) and the Makefile's
// image targets, against a real API server and against the binaries
// themselves.
//
// What the tests check:
//  1. kube-apiserver accepts every object (`kubectl apply --dry-run=server
//     -k k8s/` on a kubeenv API server).
//  2. The rendered manifests agree with the code: images with the
//     Makefile's names; REST ports, probe paths and probe schemes with
//     http.conf (or the binary's default endpoint) and the health plugin,
//     and no credentials in a probe; the CNI socket and
//     bolt host directories with podmanager.conf and bolt.conf; the
//     conflist's grpcServer with the socket; etcd.conf (and ETCD_ENDPOINTS)
//     with the contiv-etcd Service; every .conf of a ConfigMap decodes
//     strictly with its plugin's Config and validates; every environment
//     variable is one the binary reads; the init container's script,
//     run in a sandbox, installs contiv-cni and the conflist.
//  3. Each of those checks fails on a broken manifest (a table of
//     mutations of the rendered objects).
//  4. `make static` builds static binaries (no ELF interpreter, no
//     DT_NEEDED), and `make images` builds the three images with buildah,
//     without a registry or a daemon, as OCI archives named as the
//     manifests name them (each archive opened and checked: entrypoint,
//     user, files, static binaries that run, the install script's applets);
//     with docker or podman chosen, it says when their daemon does not
//     answer.
//
// Caller duties: `make kube-bins` and `make image-tools` (buildah,
// busybox-static) first (`make test` does both); the tests run
// kubectl kustomize and make, and build the binaries once per run (about
// 10 s with a warm Go cache, 2 to 3 min cold: CGO_ENABLED=0 and -trimpath
// rebuild every dependency once).
package manifests
