//go:build node

package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
)

// NodeBinsVersion names the directory of the container runtime binaries
// under _cache/node: the versions `make node-bins` installs. It must
// equal the directory the Makefile names (a test checks).
const NodeBinsVersion = "containerd-v2.4.2-crictl-v1.37.0-ptp-v1.9.1"

// EnvNodeBins names the directory of the container runtime binaries
// when set (the Makefile exports it).
const EnvNodeBins = "CONTIV_NODE_BINS"

// debianCNI holds Debian's containernetworking-plugins (loopback,
// host-local); runc is Debian's too.
const (
	debianCNI = "/usr/lib/cni"
	runcHost  = "/usr/sbin/runc"
)

// Bins are the binaries a node runs.
type Bins struct {
	// Contiv are contiv-agent, contiv-ksr and the etcd server.
	Contiv cluster.Bins
	// CNI is contiv-cni.
	CNI string
	// Kube is the directory of kube-apiserver, etcd and kubectl (envtest's
	// assets) and of kubelet, kube-scheduler and kube-controller-manager.
	Kube string
	// Runtime is the directory of containerd, containerd-shim-runc-v2,
	// ctr, crictl and ptp v1.9.1.
	Runtime string
}

// Kubelet is the kubelet binary.
func (b Bins) Kubelet() string { return filepath.Join(b.Kube, "kubelet") }

// Scheduler is the kube-scheduler binary.
func (b Bins) Scheduler() string { return filepath.Join(b.Kube, "kube-scheduler") }

// ControllerManager is the kube-controller-manager binary.
func (b Bins) ControllerManager() string { return filepath.Join(b.Kube, "kube-controller-manager") }

// Containerd is the containerd binary.
func (b Bins) Containerd() string { return filepath.Join(b.Runtime, "containerd") }

// Ctr is containerd's ctr.
func (b Bins) Ctr() string { return filepath.Join(b.Runtime, "ctr") }

// Crictl is the CRI client crictl.
func (b Bins) Crictl() string { return filepath.Join(b.Runtime, "crictl") }

// PTP is the CNI plugin ptp v1.9.1 (Debian's cannot do CNI 1.1.0).
func (b Bins) PTP() string { return filepath.Join(b.Runtime, "ptp") }

// RuntimeDir is the directory of the container runtime binaries:
// $CONTIV_NODE_BINS, else _cache/node/<NodeBinsVersion> in the
// repository.
func RuntimeDir() string {
	if dir := os.Getenv(EnvNodeBins); dir != "" {
		return dir
	}
	return filepath.Join(kubeenv.RepoRoot(), "_cache", "node", NodeBinsVersion)
}

// FindBins returns the binaries of a node: contiv-agent, contiv-ksr and
// contiv-cni of contivDir (testenv.Binaries().Dir in tests, ./bin after
// `make build`), the Kubernetes binaries of kubeenv.AssetsDir() and the
// runtime of RuntimeDir(). The error names the missing file and the make
// target that provides it.
func FindBins(contivDir string) (Bins, error) {
	contiv, err := cluster.BinsIn(contivDir)
	if err != nil {
		return Bins{}, err
	}
	kube, err := kubeenv.AssetsDir()
	if err != nil {
		return Bins{}, err
	}
	b := Bins{Contiv: contiv, CNI: filepath.Join(contivDir, "contiv-cni"), Kube: kube, Runtime: RuntimeDir()}
	if _, err := os.Stat(b.CNI); err != nil {
		return Bins{}, fmt.Errorf("node: %w (run `make build`)", err)
	}
	need := []string{b.Kubelet(), b.Scheduler(), b.ControllerManager(), b.Containerd(), b.Ctr(), b.Crictl(), b.PTP(),
		filepath.Join(b.Runtime, "containerd-shim-runc-v2"), runcHost, busyboxHost,
		filepath.Join(debianCNI, "loopback"), filepath.Join(debianCNI, "host-local")}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			return Bins{}, fmt.Errorf("node: %s is missing (%v): run `make node-bins` (or set %s and %s)", p, err, EnvNodeBins, kubeenv.EnvAssets)
		}
	}
	return b, nil
}
