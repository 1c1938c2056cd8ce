//go:build node

package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/plugins/ksr"
	"github.com/contiv-ipam/agent/tests/cluster"
	"github.com/contiv-ipam/agent/tests/kubeenv"
	"github.com/contiv-ipam/agent/tests/testenv"
)

// DefaultName is the node name when Options.Name is empty.
const DefaultName = "contiv-node"

// Options shape a node.
type Options struct {
	// Name is the node name: kubelet's --hostname-override and the
	// agent's MICROSERVICE_LABEL; default DefaultName.
	Name string
	// ContivConf is the agent's contiv.conf; empty: conf/contiv.conf.
	ContivConf string
	// AgentConf, when set, returns config files of the agent by name
	// whose content is appended to the default file of that name (or
	// makes a new file), e.g. {"podmanager.conf": "criSocket: ..."}; it
	// is called once the node's paths are known (n.Containerd.Socket)
	// and before the agent starts.
	AgentConf func(n *Node) map[string]string
	// AgentFiles replace (or add) whole config files of the agent by name
	// ({"ipam.conf": "absentPodGracePeriod: 10s\n"}: the keys not
	// written take their defaults); AgentConf then appends to them.
	AgentFiles map[string]string
	// AgentEnv adds environment variables to the agent.
	AgentEnv []string
	// KSR is contiv-ksr's ksr.conf (zero fields: the defaults).
	KSR ksr.Config
	// IPAM, when set, returns the ipam section of the conflist's ptp
	// (another IPAM plugin of the CNI bin directory, e.g. host-local with
	// its dataDir under n.Dir, for a comparison); nil: contiv-cni on the
	// agent's socket.
	IPAM func(n *Node) map[string]any
	// Logf, when set, reports each step as it ends.
	Logf func(format string, args ...any)
	// NoContiv leaves out the Contiv etcd, contiv-ksr, contiv-agent,
	// contiv-cni and the conflist, for k8s/ deployed on the node to bring
	// them (Deploy): the CNI bin directory gets ptp, loopback and
	// host-local only. The node's network namespace is then its host
	// network: kubelet runs in it too (it probes the host-network pods
	// there) with HostNetworkIP as the node's address, the API server's
	// address answers in it (a Bridge), and kubelet's healthz port on
	// the machine's loopback.
	// Start returns once the Node object exists: NotReady until a CNI
	// config appears.
	NoContiv bool
}

// Timings are how long each step of Start took.
type Timings struct {
	// APIServer: envtest's kube-apiserver and etcd, kube-scheduler and
	// kube-controller-manager started.
	APIServer time.Duration
	// Contiv: the Contiv etcd, contiv-ksr and contiv-agent ready.
	Contiv time.Duration
	// Containerd: containerd answering and both images imported.
	Containerd time.Duration
	// KubeletReady: from kubelet's start to the Node's Ready condition.
	KubeletReady time.Duration
	// Total is the whole Start.
	Total time.Duration
}

// Node is one Kubernetes node on this machine and everything it needs,
// every process a child of this one, every file under Dir or RunDir.
type Node struct {
	// Name is the node name.
	Name string
	// ID makes every machine-wide name of this node unique (network
	// namespace, run directory, cgroup root, CNI network).
	ID string
	// Dir holds the data and logs of every process.
	Dir string
	// RunDir is a short directory for containerd's sockets and state.
	RunDir string
	// NetNS is the name of the network namespace containerd (and so
	// every pod's host side: ptp's veths, routes, forwarding) lives in.
	NetNS string
	// Network is the CNI network name (the conflist's name).
	Network string
	// CgroupRoot is kubelet's cgroupRoot ("/<name>" in every hierarchy).
	CgroupRoot string
	// CNIBinDir and CNIConfDir are containerd's CNI directories.
	CNIBinDir, CNIConfDir string

	Bins       Bins
	Kube       *kubeenv.Env
	Contiv     *cluster.Cluster
	KSR        *cluster.KSR
	Agent      *cluster.Agent
	Containerd *Containerd
	Kubelet    *Kubelet
	Timings    Timings

	opts    Options
	control *controlPlane
	// bridges carry the API server into the network namespace and
	// kubelet's healthz port out of it (Options.NoContiv); Stop closes
	// them.
	bridges []*Bridge
	// absent are the machine's directories that did not exist before
	// Start (kubelet or the CNI cache may create them); Stop removes
	// those that are empty then.
	absent  []string
	stopped bool
}

// NetNSPath is the path of the node's network namespace.
func (n *Node) NetNSPath() string { return filepath.Join("/run/netns", n.NetNS) }

// sharedDirs are the machine's directories kubelet and containerd's CNI
// library write into whatever their config says.
var sharedDirs = []string{"/var/log/containers", "/var/log/pods", "/var/lib/cni/results", "/var/lib/cni"}

// Start runs a node in dir (which must exist): a kube-apiserver with its
// etcd (kubeenv), kube-scheduler and kube-controller-manager; the Contiv
// etcd, contiv-ksr and contiv-agent (tests/cluster); containerd in a
// network namespace of its own with ptp and contiv-cni as CNI, the pause
// and busybox images imported; kubelet. It returns once the Node is
// Ready. After an error, whatever started is stopped again.
func Start(ctx context.Context, dir string, bins Bins, opts Options) (*Node, error) {
	start := time.Now()
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	n := &Node{Name: opts.Name, ID: id, Dir: dir, RunDir: "/run/contiv-node-" + id, NetNS: "contiv-node-" + id,
		Network: "contiv-" + id, CgroupRoot: "/contiv-node-" + id, CNIBinDir: filepath.Join(dir, "cni", "bin"),
		CNIConfDir: filepath.Join(dir, "cni", "net.d"), Bins: bins, opts: opts}
	if err := n.start(ctx); err != nil {
		return nil, errors.Join(err, n.Stop())
	}
	n.Timings.Total = time.Since(start)
	return n, nil
}

// logf reports a step.
func (n *Node) logf(format string, args ...any) {
	if n.opts.Logf != nil {
		n.opts.Logf(format, args...)
	}
}

// start runs every step of Start.
func (n *Node) start(ctx context.Context) error {
	if err := n.prepareHost(); err != nil {
		return err
	}
	t0 := time.Now()
	kubeDir := filepath.Join(n.Dir, "kube")
	if err := os.MkdirAll(kubeDir, 0o700); err != nil {
		return err
	}
	kube, err := kubeenv.Start(kubeDir)
	if err != nil {
		return err
	}
	n.Kube = kube
	if err := n.recordEnvtest(); err != nil {
		return err
	}
	if n.control, err = startControlPlane(n.Bins, kubeDir, kube.Kubeconfig); err != nil {
		return err
	}
	n.Timings.APIServer = time.Since(t0)
	n.logf("node %s: kube-apiserver %s, kube-scheduler and kube-controller-manager started in %s", n.Name, kube.Config.Host,
		n.Timings.APIServer.Round(time.Millisecond))

	t0 = time.Now()
	// containerd's paths are needed by the agent's config (AgentConf).
	if n.Containerd, err = newContainerd(n.Bins, filepath.Join(n.Dir, "containerd"), n.RunDir, n.NetNSPath(), n.CNIBinDir, n.CNIConfDir); err != nil {
		return err
	}
	if !n.opts.NoContiv {
		if err := n.startContiv(ctx); err != nil {
			return err
		}
		n.Timings.Contiv = time.Since(t0)
		n.logf("node %s: Contiv etcd, contiv-ksr and contiv-agent (%s) ready in %s", n.Name, n.Agent.REST, n.Timings.Contiv.Round(time.Millisecond))
	}

	if err := n.writeCNI(); err != nil {
		return err
	}
	t0 = time.Now()
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	n.Timings.Containerd = time.Since(t0)
	n.logf("node %s: containerd (%s, netns %s) with the images in %s", n.Name, n.Containerd.Socket, n.NetNS,
		n.Timings.Containerd.Round(time.Millisecond))

	if n.Kubelet, err = newKubelet(n.Bins.Kubelet(), filepath.Join(n.Dir, "kubelet"), n.Name, kube.Kubeconfig, n.CgroupRoot,
		n.Containerd.Socket); err != nil {
		return err
	}
	if n.opts.NoContiv {
		if err := n.hostNetwork(); err != nil {
			return err
		}
	}
	t0 = time.Now()
	if err := n.Kubelet.Start(); err != nil {
		return err
	}
	if n.opts.NoContiv {
		if err := n.waitRegistered(ctx, 2*time.Minute); err != nil {
			return err
		}
		n.Timings.KubeletReady = time.Since(t0)
		n.logf("node %s: registered %s after kubelet's start (NotReady until a CNI config appears)", n.Name,
			n.Timings.KubeletReady.Round(time.Millisecond))
		return nil
	}
	if err := n.WaitReady(ctx, true, 2*time.Minute); err != nil {
		return err
	}
	n.Timings.KubeletReady = time.Since(t0)
	n.logf("node %s: Ready %s after kubelet's start", n.Name, n.Timings.KubeletReady.Round(time.Millisecond))
	return nil
}

// prepareHost makes the run directory, the network namespace and the
// cgroup root, and notes which shared directories are absent.
func (n *Node) prepareHost() error {
	for _, d := range sharedDirs {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			n.absent = append(n.absent, d)
		}
	}
	if swept, err := SweepStale(); err != nil || len(swept) > 0 {
		n.logf("node: swept the leftovers of nodes whose process is gone: %v (%v)", swept, err)
	}
	if err := os.Mkdir(n.RunDir, 0o700); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := n.writeOwner(); err != nil {
		return err
	}
	if out, err := exec.Command("ip", "netns", "add", n.NetNS).CombinedOutput(); err != nil {
		return fmt.Errorf("node: ip netns add %s: %w: %s (run as root)", n.NetNS, err, out)
	}
	// lo up; IPv6 on, without duplicate address detection (an address
	// is usable at once), in every interface made in it later.
	script := "ip link set lo up && for c in all default; do echo 0 >/proc/sys/net/ipv6/conf/$c/disable_ipv6 && " +
		"echo 0 >/proc/sys/net/ipv6/conf/$c/accept_dad || exit 1; done"
	if out, err := exec.Command("nsenter", "--net="+n.NetNSPath(), "/bin/sh", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("node: set up netns %s: %w: %s", n.NetNS, err, out)
	}
	return makeCgroupRoot(n.CgroupRoot)
}

// startContiv starts the Contiv etcd, contiv-ksr and the agent.
func (n *Node) startContiv(ctx context.Context) error {
	c, err := cluster.Start(ctx, filepath.Join(n.Dir, "contiv"), n.Bins.Contiv, n.Kube.Kubeconfig)
	if err != nil {
		return err
	}
	n.Contiv = c
	if n.KSR, err = c.AddKSR(ctx, n.opts.KSR); err != nil {
		return err
	}
	return n.StartAgent(ctx)
}

// agentOptions are the agent's options: contiv.conf, AgentFiles and the
// files AgentConf appends to.
func (n *Node) agentOptions() (cluster.AgentOptions, error) {
	o := cluster.AgentOptions{Node: n.Name, Conf: map[string]string{}, Env: n.opts.AgentEnv}
	// The directory and socket tests/cluster gives the agent of a node.
	dir := filepath.Join(n.Contiv.Dir, "agent-"+n.Name)
	defaults, err := testenv.AgentConfig(dir, filepath.Join(dir, "cni.sock"))
	if err != nil {
		return o, err
	}
	if n.opts.ContivConf != "" {
		defaults["contiv.conf"] = n.opts.ContivConf
		o.Conf["contiv.conf"] = n.opts.ContivConf
	}
	for name, content := range n.opts.AgentFiles {
		defaults[name] = content
		o.Conf[name] = content
	}
	if n.opts.AgentConf != nil {
		for name, extra := range n.opts.AgentConf(n) {
			base := defaults[name]
			if base != "" && !strings.HasSuffix(base, "\n") {
				base += "\n"
			}
			o.Conf[name] = base + extra
		}
	}
	return o, nil
}

// StartAgent starts the agent (again, after StopAgent) on its directory
// and bolt file, and returns once it is ready.
func (n *Node) StartAgent(ctx context.Context) error {
	o, err := n.agentOptions()
	if err != nil {
		return err
	}
	a, err := n.Contiv.AddAgent(ctx, o)
	if err != nil {
		return err
	}
	n.Agent = a
	return nil
}

// StopAgent stops the agent cleanly (SIGINT).
func (n *Node) StopAgent() error {
	if n.Agent == nil || !n.Agent.Running() {
		return nil
	}
	return n.Agent.Stop(cluster.StopTimeout)
}

// writeCNI fills the CNI directories: ptp v1.9.1 (Debian's stops at CNI
// 1.0.0, and containerd sends STATUS only to a 1.1.0 conflist),
// contiv-cni, Debian's loopback and host-local; one conflist, ptp with
// contiv-cni as its IPAM on the agent's socket (or Options.IPAM's).
func (n *Node) writeCNI() error {
	for _, d := range []string{n.CNIBinDir, n.CNIConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	plugins := []string{n.Bins.PTP(), filepath.Join(debianCNI, "loopback"), filepath.Join(debianCNI, "host-local")}
	if !n.opts.NoContiv {
		plugins = append(plugins, n.Bins.CNI)
	}
	for _, src := range plugins {
		if err := copyFile(src, filepath.Join(n.CNIBinDir, filepath.Base(src))); err != nil {
			return err
		}
	}
	if n.opts.NoContiv {
		return nil // the deployment's init container installs contiv-cni and the conflist
	}
	ipam := map[string]any{"type": "contiv-cni", "grpcServer": n.Agent.Socket}
	if n.opts.IPAM != nil {
		ipam = n.opts.IPAM(n)
	}
	conf, err := json.MarshalIndent(map[string]any{"cniVersion": "1.1.0", "name": n.Network, "plugins": []any{
		map[string]any{"type": "ptp", "ipMasq": false, "ipam": ipam},
	}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.CNIConfDir, "10-contiv.conflist"), conf, 0o644)
}

// startContainerd builds the images, starts containerd and imports them.
func (n *Node) startContainerd(ctx context.Context) error {
	pause, busybox, err := BuildImages(filepath.Join(n.Dir, "images"))
	if err != nil {
		return err
	}
	if err := n.Containerd.Start(ctx); err != nil {
		return err
	}
	for _, img := range []string{pause, busybox} {
		if err := n.ImportImage(ctx, img); err != nil {
			return err
		}
	}
	return nil
}

// ImportImage imports an OCI archive (OCIImage.WriteArchive's, or
// buildah's oci-archive) into the node's containerd, for pods to run
// without a registry (imagePullPolicy Never or IfNotPresent).
func (n *Node) ImportImage(ctx context.Context, tarPath string) error {
	return n.Containerd.ImportImage(ctx, tarPath)
}

// RestartKubelet stops kubelet and starts it again, and returns once it
// is healthy (/healthz); the pods go on.
func (n *Node) RestartKubelet(ctx context.Context) error {
	if err := n.Kubelet.Stop(); err != nil {
		return err
	}
	if err := n.Kubelet.Start(); err != nil {
		return err
	}
	return n.Kubelet.WaitHealthy(ctx, time.Minute)
}

// RestartContainerd stops containerd and starts it again; the shims and
// the pods go on.
func (n *Node) RestartContainerd(ctx context.Context) error {
	return n.Containerd.Restart(ctx)
}

// copyFile copies an executable.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// randomID is six hex digits.
func randomID() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
