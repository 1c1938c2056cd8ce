//go:build node

package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupFS is where the cgroup v1 hierarchies are mounted.
const cgroupFS = "/sys/fs/cgroup"

// hierarchies are the cgroup hierarchies mounted under cgroupFS (cpu,
// memory, ..., systemd, unified).
func hierarchies() ([]string, error) {
	entries, err := os.ReadDir(cgroupFS)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(cgroupFS, e.Name()))
		}
	}
	return out, nil
}

// makeCgroupRoot creates root in every cgroup v1 hierarchy (kubelet
// refuses a cgroupRoot missing in one), with the parent's CPUs and memory
// nodes in the cpuset one (a new cpuset has none).
func makeCgroupRoot(root string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if filepath.Base(h) == "unified" {
			continue
		}
		dir := filepath.Join(h, root)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("node: cgroup root: %w", err)
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			data, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				return fmt.Errorf("node: cgroup root %s: %w", f, err)
			}
		}
	}
	return nil
}

// cgroupDirs are the directories of the node's cgroup root in every
// hierarchy, deepest first.
func (n *Node) cgroupDirs() []string {
	hs, _ := hierarchies()
	var dirs []string
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, n.CgroupRoot), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return dirs
}

// Stop stops everything Start started and removes what kubelet,
// containerd and the CNI plugins leave on the machine; it may be called
// again (it does nothing then). Order: kubelet (and the bridges of
// Options.NoContiv); every sandbox stopped and
// removed through containerd while the agent still answers (each is a
// CNI DEL); containerd; any process still in the node's cgroups or
// naming its run directory (shims, containers), by PID; the agent,
// contiv-ksr and the Contiv etcd; kube-controller-manager and
// kube-scheduler; the API server; then the mounts under the node's
// directories, its network namespace (and with it every pod's network
// namespace, which containerd keeps under its state directory), its
// cgroups, kubelet's links in /var/log/containers, the CNI cache entries
// of its network, its run directory, and the shared directories Start
// found absent if they are empty.
func (n *Node) Stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	if n.Kubelet != nil {
		errs = append(errs, n.Kubelet.Stop())
	}
	errs = append(errs, n.closeBridges())
	if n.Containerd != nil && n.Containerd.proc != nil && n.Containerd.proc.running() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		errs = append(errs, n.Containerd.RemoveSandboxes(ctx))
		cancel()
	}
	if n.Containerd != nil {
		errs = append(errs, n.Containerd.Stop())
	}
	errs = append(errs, n.killStragglers())
	if n.Contiv != nil {
		errs = append(errs, n.Contiv.Stop())
	}
	if n.control != nil {
		errs = append(errs, n.control.stop())
	}
	if n.Kube != nil {
		errs = append(errs, n.Kube.Stop())
	}
	errs = append(errs, n.cleanup())
	return errors.Join(errs...)
}

// stragglers are the processes of the node that outlive containerd: those
// in its cgroups (containers, pause) and those whose command line names
// any of words (the shims name the run directory: -address <run
// dir>/containerd.sock).
func (n *Node) stragglers(words ...string) []int {
	seen := map[int]bool{}
	for _, d := range n.cgroupDirs() {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				seen[pid] = true
			}
		}
	}
	for _, pid := range processesNaming(words...) {
		seen[pid] = true
	}
	delete(seen, os.Getpid())
	var out []int
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// processesNaming are the PIDs of the processes whose command line
// contains any of words (zombies have none).
func processesNaming(words ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		cmdline := strings.ReplaceAll(string(data), "\x00", " ")
		for _, w := range words {
			if w != "" && strings.Contains(cmdline, w) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// killStragglers sends SIGKILL to every straggler, by PID, until none
// is left (10 s at most).
func (n *Node) killStragglers() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := n.stragglers(n.RunDir)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node: processes still running after SIGKILL: %v", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mountsUnder are the mount points under any of dirs, deepest first.
func mountsUnder(dirs ...string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if d != "" && (mp == d || strings.HasPrefix(mp, d+"/")) {
				out = append(out, mp)
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cleanup removes what the processes leave on the machine.
func (n *Node) cleanup() error {
	var errs []error
	for _, mp := range mountsUnder(n.RunDir, n.Dir) {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("node: umount %s: %w", mp, err))
		}
	}
	if n.NetNS != "" {
		if _, err := os.Stat(n.NetNSPath()); err == nil {
			if out, err := exec.Command("ip", "netns", "del", n.NetNS).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("node: ip netns del %s: %w: %s", n.NetNS, err, out))
			}
		}
	}
	errs = append(errs, n.removeCgroups())
	if n.Kubelet != nil {
		errs = append(errs, removeLinksInto("/var/log/containers", n.Kubelet.PodLogsDir))
	}
	if n.Network != "" {
		files, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n.Network+"-*"))
		for _, f := range files {
			errs = append(errs, os.Remove(f))
		}
	}
	if n.RunDir != "" {
		errs = append(errs, os.RemoveAll(n.RunDir))
	}
	for _, d := range n.absent {
		_ = os.Remove(d) // only if empty: another node may use it now
	}
	return errors.Join(errs...)
}

// removeCgroups removes the node's cgroup directories, deepest first
// (an emptied cgroup may stay busy for a moment: retried for 5 s).
func (n *Node) removeCgroups() error {
	if n.CgroupRoot == "" {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var failed []string
		for _, d := range n.cgroupDirs() {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				failed = append(failed, fmt.Sprintf("%s: %v", d, err))
			}
		}
		if len(failed) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node: cgroups left: %s", strings.Join(failed, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeLinksInto removes the symbolic links of dir whose target is
// under target.
func removeLinksInto(dir, target string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // no directory: no link
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(p); err == nil && strings.HasPrefix(dest, target+"/") {
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what of the node is still on the machine (after Stop,
// nothing): its processes (in its cgroups, or naming its directories),
// mounts, network namespace, cgroups, links in /var/log/containers, CNI
// cache entries and run directory.
func (n *Node) Leftovers() []string {
	var out []string
	for _, pid := range n.stragglers(n.RunDir, n.Dir) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	for _, mp := range mountsUnder(n.RunDir, n.Dir) {
		out = append(out, "mount "+mp)
	}
	if _, err := os.Stat(n.NetNSPath()); err == nil {
		out = append(out, "network namespace "+n.NetNSPath())
	}
	for _, d := range n.cgroupDirs() {
		out = append(out, "cgroup "+d)
	}
	if entries, err := os.ReadDir("/var/log/containers"); err == nil && n.Kubelet != nil {
		for _, e := range entries {
			if dest, err := os.Readlink(filepath.Join("/var/log/containers", e.Name())); err == nil && strings.HasPrefix(dest, n.Kubelet.PodLogsDir+"/") {
				out = append(out, "link /var/log/containers/"+e.Name())
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n.Network+"-*"))
	for _, f := range files {
		out = append(out, "CNI cache "+f)
	}
	if _, err := os.Stat(n.RunDir); err == nil {
		out = append(out, "directory "+n.RunDir)
	}
	return out
}

// ownerFile, in a node's RunDir, names the process that runs the node
// (its PID and start time) and the node's Dir, so that a later Start can
// tell the leftovers of a process that died without its Stop (SIGKILL,
// a test binary's timeout) from a node another process runs now.
const ownerFile = "owner"

// runDirGlob matches the run directories of every node on the machine.
const runDirGlob = "/run/contiv-node-*"

// writeOwner writes the owner file of this process into the run
// directory.
func (n *Node) writeOwner() error {
	start, err := procStartTime(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.RunDir, ownerFile), fmt.Appendf(nil, "%d %s\n%s\n", os.Getpid(), start, n.Dir), 0o600)
}

// procStartTime is field 22 of /proc/<pid>/stat, the process's start
// time since boot (a PID used again has another).
func procStartTime(pid int) (string, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(fields))
	}
	return fields[19], nil
}

// staleAfter is how old a run directory without an owner file must be
// to be taken for a leftover (the file is written right after the
// directory).
const staleAfter = time.Minute

// SweepStale removes the leftovers of nodes whose process is gone
// without stopping them: for each run directory whose owner process no
// longer runs, it kills the node's remaining processes by PID and removes
// its mounts, network namespace, cgroups, log links, CNI cache entries
// and run directory (the node's Dir, the dead test's, stays). Start calls
// it; it returns the run directories it swept.
func SweepStale() ([]string, error) {
	dirs, err := filepath.Glob(runDirGlob)
	if err != nil {
		return nil, err
	}
	var swept []string
	var errs []error
	for _, runDir := range dirs {
		n, stale := staleNode(runDir)
		if !stale {
			continue
		}
		errs = append(errs, killEnvtest(runDir), n.killStragglers(), n.cleanup())
		swept = append(swept, runDir)
	}
	return swept, errors.Join(errs...)
}

// staleNode rebuilds the names of the node of runDir, and tells whether
// its owner is gone.
func staleNode(runDir string) (*Node, bool) {
	id := strings.TrimPrefix(filepath.Base(runDir), "contiv-node-")
	n := &Node{ID: id, RunDir: runDir, NetNS: "contiv-node-" + id, Network: "contiv-" + id, CgroupRoot: "/contiv-node-" + id}
	data, err := os.ReadFile(filepath.Join(runDir, ownerFile))
	if err != nil {
		st, serr := os.Stat(runDir)
		return n, serr == nil && time.Since(st.ModTime()) > staleAfter
	}
	lines := strings.SplitN(strings.TrimSpace(string(data)), "\n", 2)
	var pid int
	var start string
	if _, err := fmt.Sscanf(lines[0], "%d %s", &pid, &start); err != nil {
		return n, false // not ours to judge
	}
	if len(lines) == 2 && filepath.IsAbs(lines[1]) {
		n.Dir = lines[1]
		n.Kubelet = &Kubelet{PodLogsDir: filepath.Join(n.Dir, "kubelet", "pod-logs")}
	}
	now, err := procStartTime(pid)
	return n, err != nil || now != start
}
