//go:build node

// Package node runs a real Kubernetes node on this machine, with
// contiv-cni as the IPAM of its pods: envtest's kube-apiserver and etcd
// (tests/kubeenv), kube-scheduler and kube-controller-manager; the Contiv
// etcd, contiv-ksr and contiv-agent (tests/cluster); containerd v2.4.2
// with Debian's runc, in a network namespace of its own, whose CNI
// conflist (cniVersion 1.1.0) runs ptp v1.9.1 with contiv-cni as its
// IPAM on the agent's socket; and kubelet v1.36.3 on that containerd,
// registering the Node under the agent's node name. Images come from no
// registry: OCIImage writes OCI archives (a static pause program of
// tests/node/pause, and Debian's busybox-static) and ImportImage imports
// them (and any other OCI archive, such as buildah's) into containerd.
// The scenarios of the package's tests and `make node-demo`
// (tests/node/cmd/node-demo) run on it. Every file carries the build tag
// node: `make test-node` runs the package (go test -tags node).
//
// What it keeps off the machine: every port is on loopback (kernel- or
// test-chosen); every directory is under the node's Dir (the caller's)
// or its RunDir (/run/contiv-node-<ID>, short for unix sockets); the
// pods' host side (ptp's veths, routes, ip_forward) is in containerd's
// network namespace contiv-node-<ID>, and the pods' own namespaces are
// kept under containerd's state directory; kubelet's cgroups are under
// the cgroup root /contiv-node-<ID>; kubelet runs in a mount namespace of
// its own where files holding the current values are bind-mounted over
// the sysctls it writes (Sysctls), so the machine's stay as they were.
// What it cannot keep off it and removes in Stop: kubelet's links in
// /var/log/containers (to the pod logs in its own podLogsDir), the CNI
// result cache in /var/lib/cni/results (entries of its network name,
// contiv-<ID>), the cgroups, the mounts and the network namespace.
// Leftovers lists whatever of a node is still there.
//
// # Owners
//
//   - A Node belongs to the goroutine that started it; it is not safe for
//     concurrent use. Its processes are its children: each leads a
//     process group of its own and gets SIGKILL from the kernel if its
//     parent dies (Pdeathsig); each has a waiter goroutine that only
//     reaps it. The shims and containers containerd starts are not its
//     children: Stop removes the sandboxes through containerd, then kills
//     by PID what is left in the node's cgroups or names its RunDir.
//   - Two nodes never share a name on the machine (ID is random), so
//     nodes of several test processes may run at once.
//
// # Caller duties
//
//  1. Run as root, after `make node-bins` (kubelet, kube-scheduler and
//     kube-controller-manager beside `make kube-bins`' binaries;
//     containerd, its shim, ctr, crictl and ptp in _cache/node or
//     $CONTIV_NODE_BINS; Debian's runc and busybox-static) and with
//     contiv-agent, contiv-ksr and contiv-cni built (testenv.Main in a
//     test's TestMain, `make build` for the demo); FindBins names what is
//     missing and the target that builds it.
//  2. Call Start (or StartT in a test) with a directory of the caller's;
//     it returns once the Node is Ready. Options.AgentConf adds to the
//     agent's config files once the node's paths are known (for example
//     podmanager.conf's criSocket: n.Containerd.Socket).
//  3. Create pods and Deployments of BusyboxImage through the helpers or
//     n.Kube.Client; the scheduler places them. Pods need no service
//     account token (no token controller runs; the API server does not
//     add one) and must not pull (imagePullPolicy Never). Projected,
//     secret and downwardAPI volumes appear empty in the containers
//     (kubelet's tmpfs mounts stay in its private mount namespace): use
//     configMap, disk-backed emptyDir or hostPath volumes.
//  4. Call Stop once (StartT does it at cleanup and fails the test if
//     Leftovers is not empty): it stops every process and removes what
//     they left; it may be called again and then does nothing. A process
//     killed before its Stop leaves its node behind: the next Start
//     sweeps it (SweepStale). With CONTIV_NODE_KEEP set, StartT keeps
//     the node's directory, with every log, after the test.
package node
