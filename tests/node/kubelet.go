//go:build node

package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sysctls are the files kubelet writes on the host (its kernel tunables:
// vm.overcommit_memory, vm.panic_on_oom, kernel.panic,
// kernel.panic_on_oops, kernel.keys.root_maxkeys and root_maxbytes).
// kubelet runs in a mount namespace of its own where a file holding the
// current value is bind-mounted over each, so the machine's values stay
// as they are.
var Sysctls = []string{
	"/proc/sys/vm/overcommit_memory",
	"/proc/sys/vm/panic_on_oom",
	"/proc/sys/kernel/panic",
	"/proc/sys/kernel/panic_on_oops",
	"/proc/sys/kernel/keys/root_maxkeys",
	"/proc/sys/kernel/keys/root_maxbytes",
}

// ReadSysctls returns the machine's values of Sysctls, by path.
func ReadSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, p := range Sysctls {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out[p] = strings.TrimSpace(string(data))
	}
	return out, nil
}

// kubeletConfig is the KubeletConfiguration: cgroup v1 with the cgroupfs
// driver under a cgroup root of the node's own, no swap check, no
// oom_score_adj, no iptables chains, eviction and image GC thresholds
// that never trigger here, every directory under the node's, every port
// on loopback, the API open to loopback callers (anonymous, AlwaysAllow).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
failSwapOn: false
oomScoreAdj: 0
makeIPTablesUtilChains: false
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: %[2]s
containerRuntimeEndpoint: unix://%[3]s
address: 127.0.0.1
port: %[4]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[5]d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
maxPods: 110
serializeImagePulls: false
resolvConf: /etc/resolv.conf
`

// kubeletWrapper runs in kubelet's new mount namespace (unshare -m
// --propagation private): it bind-mounts a file holding the current value
// over each of Sysctls, then execs kubelet. mount -n and LIBMOUNT_UTAB
// keep util-linux from writing /run/mount.
const kubeletWrapper = `set -e
%s
exec "$@"
`

// Kubelet is kubelet against the node's containerd and API server.
type Kubelet struct {
	// RootDir is its --root-dir; PodLogsDir its podLogsDir.
	RootDir, PodLogsDir string
	// Port and HealthzPort are its loopback ports.
	Port, HealthzPort int

	dir, node, kubeconfig string
	bin                   string
	// netns, when set, is the network namespace kubelet runs in, and
	// nodeIP the node's address there (Options.NoContiv); "": the
	// machine's, and 127.0.0.1.
	netns, nodeIP string
	proc          *proc
}

// newKubelet writes kubelet's config and wrapper into dir.
func newKubelet(bin, dir, node, kubeconfig, cgroupRoot, socket string) (*Kubelet, error) {
	k := &Kubelet{RootDir: filepath.Join(dir, "root"), PodLogsDir: filepath.Join(dir, "pod-logs"), dir: dir, node: node,
		kubeconfig: kubeconfig, bin: bin}
	for _, d := range []string{k.RootDir, k.PodLogsDir, filepath.Join(dir, "sysctl")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	var err error
	if k.Port, err = freePort(); err != nil {
		return nil, err
	}
	if k.HealthzPort, err = freePort(); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(kubeletConfig, cgroupRoot, k.PodLogsDir, socket, k.Port, k.HealthzPort)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	return k, nil
}

// writeWrapper writes the sysctl files with the machine's current values
// and the wrapper that mounts them.
func (k *Kubelet) writeWrapper() (string, error) {
	values, err := ReadSysctls()
	if err != nil {
		return "", err
	}
	var mounts []string
	for _, p := range Sysctls {
		file := filepath.Join(k.dir, "sysctl", strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", "."))
		if err := os.WriteFile(file, []byte(values[p]+"\n"), 0o600); err != nil {
			return "", err
		}
		mounts = append(mounts, fmt.Sprintf("mount -n --bind '%s' '%s'", file, p))
	}
	script := filepath.Join(k.dir, "run.sh")
	return script, os.WriteFile(script, []byte(fmt.Sprintf(kubeletWrapper, strings.Join(mounts, "\n"))), 0o600)
}

// Start runs kubelet (it registers the Node and reports it Ready once the
// runtime and its network are ready; Node.WaitReady waits for that).
func (k *Kubelet) Start() error {
	script, err := k.writeWrapper()
	if err != nil {
		return err
	}
	args := []string{"-m", "--propagation", "private", "/bin/sh", script, k.bin,
		"--config=" + filepath.Join(k.dir, "config.yaml"), "--kubeconfig=" + k.kubeconfig, "--root-dir=" + k.RootDir,
		"--hostname-override=" + k.node}
	bin := "unshare"
	if k.netns != "" {
		bin, args = "nsenter", append([]string{"--net=" + k.netns, "unshare"}, args...)
	}
	nodeIP := "127.0.0.1"
	if k.nodeIP != "" {
		nodeIP = k.nodeIP
	}
	args = append(args, "--node-ip="+nodeIP)
	p, err := startProc("kubelet", k.dir, bin, args,
		append(os.Environ(), "LIBMOUNT_UTAB="+filepath.Join(k.dir, "utab")))
	if err != nil {
		return err
	}
	k.proc = p
	return nil
}

// WaitHealthy waits until kubelet's /healthz answers "ok" (it runs and
// its sync loop is healthy), or until timeout.
func (k *Kubelet) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort)
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer"
	err := poll(ctx, timeout, func() (bool, error) {
		if k.proc == nil || !k.proc.running() {
			return false, fmt.Errorf("kubelet is not running (%v)", k.proc.exitErr())
		}
		resp, err := client.Get(url)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		_ = resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("kubelet %s: %w; last answer %s; %s", url, err, last, tailFile(k.Log(), 10))
	}
	return nil
}

// Stop stops kubelet (SIGTERM, SIGKILL after 20 s); its pods go on.
func (k *Kubelet) Stop() error {
	if k.proc == nil {
		return nil
	}
	return k.proc.stop(20 * time.Second)
}

// Running tells whether kubelet runs.
func (k *Kubelet) Running() bool { return k.proc != nil && k.proc.running() }

// PID is kubelet's process ID (0 before Start).
func (k *Kubelet) PID() int {
	if k.proc == nil {
		return 0
	}
	return k.proc.PID()
}

// Log is the file holding kubelet's output.
func (k *Kubelet) Log() string { return filepath.Join(k.dir, "kubelet.log") }

// freePort returns a loopback TCP port the kernel chose (free when it
// answered; the caller binds it soon after).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
