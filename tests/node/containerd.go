//go:build node

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// containerdConfig is containerd's config (version 3): every directory
// and socket of its own (root, temp and opt under the node's directory;
// state, sockets, runc's root and the shims' sockets under the short run
// directory, since a unix socket path is limited to 107 bytes and the
// shims' socket directory to 42), NRI off, no imports, the pod network
// namespaces under its state directory, the CNI directories of the node,
// the pinned local pause image, and restrict_oom_score_adj, without which
// every sandbox fails on this kind of machine (runc cannot lower
// oom_score_adj without CAP_SYS_RESOURCE).
const containerdConfig = `version = 3
root = '%[1]s/root'
state = '%[2]s/state'
temp = '%[1]s/tmp'
imports = []
disabled_plugins = ['io.containerd.nri.v1.nri']

[grpc]
  address = '%[2]s/containerd.sock'
[ttrpc]
  address = '%[2]s/containerd.sock.ttrpc'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '%[3]s'
  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '%[6]s'
        Root = '%[2]s/runc'
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['%[4]s']
      conf_dir = '%[5]s'
      use_internal_loopback = true
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
  [plugins.'io.containerd.internal.v1.opt']
    path = '%[1]s/opt'
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = '%[2]s/s'
`

// crictlConfig points crictl at the node's containerd (and keeps it from
// reading /etc/crictl.yaml).
const crictlConfig = "runtime-endpoint: unix://%[1]s\nimage-endpoint: unix://%[1]s\ntimeout: 30\n"

// containerdStartTimeout bounds a start of containerd, until ctr gets an
// answer.
const containerdStartTimeout = 30 * time.Second

// Containerd is containerd run in the node's network namespace (with
// nsenter, which keeps the machine's mount namespace: ip netns exec would
// remount /sys and hide the cgroup v1 hierarchies), with runc, the CNI
// plugins of the node and its own directories.
type Containerd struct {
	// Socket is the absolute path of its CRI and containerd socket.
	Socket string
	// Config is its config file.
	Config string
	// CrictlConfig is crictl's config file for it.
	CrictlConfig string

	bins  Bins
	dir   string // the directory of the config and the log
	netns string // the path of the network namespace
	proc  *proc
}

// newContainerd writes the config of containerd and crictl into dir.
func newContainerd(bins Bins, dir, runDir, netns, cniBin, cniConf string) (*Containerd, error) {
	c := &Containerd{Socket: filepath.Join(runDir, "containerd.sock"), Config: filepath.Join(dir, "containerd.toml"),
		CrictlConfig: filepath.Join(dir, "crictl.yaml"), bins: bins, dir: dir, netns: netns}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(containerdConfig, dir, runDir, PauseImage, cniBin, cniConf, runcHost)
	if err := os.WriteFile(c.Config, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.CrictlConfig, []byte(fmt.Sprintf(crictlConfig, c.Socket)), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

// Start runs containerd and returns once it answers on its socket.
func (c *Containerd) Start(ctx context.Context) error {
	p, err := startProc("containerd", c.dir, "nsenter", []string{"--net=" + c.netns, c.bins.Containerd(), "--config", c.Config},
		append(os.Environ(), "PATH="+c.bins.Runtime+":"+os.Getenv("PATH")))
	if err != nil {
		return err
	}
	c.proc = p
	ctx, cancel := context.WithTimeout(ctx, containerdStartTimeout)
	defer cancel()
	for {
		out, err := c.ctr(ctx, "version")
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("containerd exited (%v): %s; %s", p.err, out, p.tail(20))
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("containerd does not answer on %s: %s: %w; %s", c.Socket, out, ctx.Err(), p.tail(20)), p.kill())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops containerd (SIGTERM, SIGKILL after 20 s); the shims and the
// pods they run go on, as on a real node.
func (c *Containerd) Stop() error {
	if c.proc == nil {
		return nil
	}
	return c.proc.stop(20 * time.Second)
}

// Restart stops containerd and starts it again on the same directories.
func (c *Containerd) Restart(ctx context.Context) error {
	if err := c.Stop(); err != nil {
		return err
	}
	return c.Start(ctx)
}

// PID is containerd's process ID (0 before Start).
func (c *Containerd) PID() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.PID()
}

// Log is the file holding containerd's output.
func (c *Containerd) Log() string { return filepath.Join(c.dir, "containerd.log") }

// ctr runs ctr against containerd in the k8s.io namespace (the CRI's).
func (c *Containerd) ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.bins.Ctr(), append([]string{"-a", c.Socket, "-n", "k8s.io"}, args...)...)
	return cmd.CombinedOutput()
}

// ImportImage imports the OCI archive (or docker archive) at tarPath into
// the CRI's image store (`ctr -n k8s.io images import --local`), unpacked
// for the overlayfs snapshotter; pods then run it with imagePullPolicy
// Never (or IfNotPresent) without a registry.
func (c *Containerd) ImportImage(ctx context.Context, tarPath string) error {
	abs, err := filepath.Abs(tarPath)
	if err != nil {
		return err
	}
	if out, err := c.ctr(ctx, "images", "import", "--local", abs); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", abs, err, out)
	}
	return nil
}

// Crictl runs crictl against containerd, inside containerd's network
// namespace (crictl exec then reaches the pod like kubectl exec would);
// it returns stdout, and an error carrying stderr.
func (c *Containerd) Crictl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + c.netns, c.bins.Crictl(), "-c", c.CrictlConfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("crictl %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	return stdout.Bytes(), nil
}

// lastLines is the last n lines of s, without cgroup v1's deprecation
// warning.
func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if !strings.Contains(l, "DEPRECATION") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "\n")
}

// Sandbox is a pod sandbox as crictl lists it.
type Sandbox struct {
	ID       string `json:"id"`
	State    string `json:"state"` // SANDBOX_READY, SANDBOX_NOTREADY
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
}

// Sandboxes lists the pod sandboxes containerd knows.
func (c *Containerd) Sandboxes(ctx context.Context) ([]Sandbox, error) {
	out, err := c.Crictl(ctx, "pods", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []Sandbox `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("crictl pods -o json: %w in %s", err, out)
	}
	return list.Items, nil
}

// SandboxNetNS is the network namespace path of a sandbox (from crictl
// inspectp).
func (c *Containerd) SandboxNetNS(ctx context.Context, id string) (string, error) {
	out, err := c.Crictl(ctx, "inspectp", "-o", "json", id)
	if err != nil {
		return "", err
	}
	var st struct {
		Info struct {
			RuntimeSpec struct {
				Linux struct {
					Namespaces []struct {
						Type string `json:"type"`
						Path string `json:"path"`
					} `json:"namespaces"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return "", fmt.Errorf("crictl inspectp %s: %w", id, err)
	}
	for _, ns := range st.Info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path, nil
		}
	}
	return "", fmt.Errorf("crictl inspectp %s: no network namespace path", id)
}

// RemoveSandboxes stops and removes every sandbox (crictl rmp -a -f):
// each is a CNI DEL.
func (c *Containerd) RemoveSandboxes(ctx context.Context) error {
	sbs, err := c.Sandboxes(ctx)
	if err != nil || len(sbs) == 0 {
		return err
	}
	_, err = c.Crictl(ctx, "rmp", "-a", "-f")
	return err
}
