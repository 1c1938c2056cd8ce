//go:build node

package node

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// envKilledNode makes TestKilledNodeChild run, the child process of
// TestSweepAfterKill: it holds the directory of the parent's binaries
// (TestMain builds none in the child, which leaves nothing to remove
// when it is killed).
const envKilledNode = "CONTIV_NODE_KILLED_CHILD"

// TestKilledNodeChild, run by TestSweepAfterKill in a child process,
// starts a node with a pod running, prints the node's RunDir and Dir and
// "ready", and waits to be killed.
func TestKilledNodeChild(t *testing.T) {
	if os.Getenv(envKilledNode) == "" {
		t.Skip("the child of TestSweepAfterKill")
	}
	bins, err := FindBins(os.Getenv(envKilledNode))
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(t.Context(), t.TempDir(), bins, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.CreatePod(t.Context(), BusyboxPod(ns, "orphan")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WaitPodsRunning(t.Context(), ns, LabelApp+"=orphan", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("rundir %s\ndir %s\nready\n", n.RunDir, n.Dir)
	time.Sleep(time.Hour)
}

// TestSweepAfterKill: a process running a node (with a pod) is killed
// with SIGKILL; its children die with it (Pdeathsig) but the shim, the
// pod's processes, the mounts, the network namespaces and the cgroups
// stay. The next Start's SweepStale removes all of it; a node of a live
// process is left alone.
func TestSweepAfterKill(t *testing.T) {
	g := NewWithT(t)
	live := StartT(t, Options{})
	child := exec.Command(os.Args[0], "-test.run=^TestKilledNodeChild$", "-test.v")
	child.Env = append(os.Environ(), envKilledNode+"="+testenv.Binaries().Dir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(child.Start()).To(Succeed())
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	var runDir, dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "rundir "); ok {
			runDir = v
		}
		if v, ok := strings.CutPrefix(line, "dir "); ok {
			dir = v
		}
		if line == "ready" {
			break
		}
	}
	g.Expect(runDir).NotTo(BeEmpty(), "the child's node started")
	// The killed test's TempDir (<tmp>/TestKilledNodeChild<random>/001).
	if top := filepath.Dir(dir); strings.HasPrefix(filepath.Base(top), "TestKilledNodeChild") {
		t.Cleanup(func() { _ = os.RemoveAll(top) })
	}
	g.Expect(child.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = child.Wait()

	n, stale := staleNode(runDir)
	g.Expect(stale).To(BeTrue(), "the node of a killed process is stale")
	envtest := envtestPIDs(t, runDir)
	g.Expect(envtest).To(HaveLen(2), "the killed child's kube-apiserver and etcd, recorded")
	g.Eventually(func() []string { return n.Leftovers() }, 10*time.Second, 200*time.Millisecond).
		Should(ContainElement(HavePrefix("network namespace")), "what the killed process left")
	kinds := map[string]int{}
	for _, l := range n.Leftovers() {
		kinds[strings.Fields(l)[0]]++
	}
	t.Logf("left by the killed process, by kind: %v", kinds)

	swept, err := SweepStale()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(swept).To(ContainElement(runDir))
	g.Expect(swept).NotTo(ContainElement(live.RunDir), "the node of this process runs")
	g.Expect(n.Leftovers()).To(BeEmpty())
	for _, pid := range envtest {
		g.Eventually(func() bool { return processGone(pid) }, 10*time.Second, 100*time.Millisecond).
			Should(BeTrue(), "envtest's process %d of the killed child", pid)
	}
	ready, _, err := live.NodeReady(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ready).To(BeTrue(), "the live node after the sweep")
}

// envtestPIDs are the PIDs envtestFile of runDir lists.
func envtestPIDs(t *testing.T, runDir string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, envtestFile))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var pid int
		var start string
		if _, err := fmt.Sscanf(line, "%d %s", &pid, &start); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processGone tells whether pid no longer runs (a zombie counts as gone).
func processGone(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] == "Z"
}
