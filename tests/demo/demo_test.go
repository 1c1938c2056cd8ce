package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Timeouts of the demo run.
const (
	readyTimeout = 120 * time.Second
	exitTimeout  = 60 * time.Second
)

// running is the demo process and its output, line by line.
type running struct {
	cmd     *exec.Cmd
	lines   chan string   // closed at EOF
	done    chan struct{} // closed once reaped
	err     error         // exit error; read after done
	started []procInfo    // the processes it started (see snapshot)
}

// startDemo builds the demo and runs it on testenv's binaries.
func startDemo(t *testing.T) *running {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.Command("go", "build", "-o", bin, "./tests/demo")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./tests/demo: %v\n%s", err, out)
	}
	r := &running{cmd: exec.Command(bin, "-bin", testenv.Binaries().Dir),
		lines: make(chan string, 1024), done: make(chan struct{})}
	r.cmd.Stderr = os.Stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go r.read(stdout)
	t.Cleanup(func() { r.cleanup(t) })
	return r
}

// read forwards the output lines, then reaps the process.
func (r *running) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		r.lines <- sc.Text()
	}
	close(r.lines)
	r.err = r.cmd.Wait()
	close(r.done)
}

// until returns the lines up to and including the first that starts with
// prefix; the test fails at EOF or after timeout.
func (r *running) until(t *testing.T, prefix string, timeout time.Duration) []string {
	t.Helper()
	deadline := time.After(timeout)
	var got []string
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				t.Fatalf("the demo ended before %q; its output:\n%s", prefix, strings.Join(got, "\n"))
			}
			got = append(got, line)
			if strings.HasPrefix(line, prefix) {
				return got
			}
		case <-deadline:
			t.Fatalf("no %q from the demo within %s; its output:\n%s", prefix, timeout, strings.Join(got, "\n"))
		}
	}
}

// snapshot records the processes the demo runs now.
func (r *running) snapshot() []procInfo {
	r.started = descendants(r.cmd.Process.Pid)
	return r.started
}

// cleanup ends a demo the test left running (SIGINT, then SIGKILL) and
// kills every process it started that is still alive, so that a failed
// test leaves nothing behind.
func (r *running) cleanup(t *testing.T) {
	select {
	case <-r.done:
	default:
		left := descendants(r.cmd.Process.Pid)
		_ = r.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-r.done:
		case <-time.After(exitTimeout):
			_ = r.cmd.Process.Kill()
		}
		r.started = append(r.started, left...)
	}
	killed := 0
	for _, p := range r.started {
		if alive(p) && syscall.Kill(p.pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed > 0 {
		t.Logf("cleanup killed %d processes the demo left behind", killed)
	}
}

// gets parses the "== <node>: GET <url>" sections: node and path -> JSON.
func gets(lines []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(lines); i++ {
		node, rawURL, ok := strings.Cut(strings.TrimPrefix(lines[i], "== "), ": GET ")
		u, err := url.Parse(rawURL)
		if !strings.HasPrefix(lines[i], "== ") || !ok || err != nil {
			continue
		}
		var body []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			body = append(body, lines[i])
		}
		out[node+" "+u.Path] = strings.Join(body, "\n")
	}
	return out
}

// `make demo` shows two agents with their own subnets, each holding its
// own pods, and SIGINT ends the demo and every process it started.
func TestDemoShowsBothAgentsAndStopsEverything(t *testing.T) {
	g := NewWithT(t)
	r := startDemo(t)
	out := r.until(t, "ready:", readyTimeout)
	started := r.snapshot()
	g.Expect(comms(started)).To(And(HaveKeyWithValue("contiv-agent", 2), HaveKeyWithValue("contiv-ksr", 1),
		HaveKeyWithValue("kube-apiserver", 1), HaveKeyWithValue("etcd", 2)),
		"the demo's processes: two agents, contiv-ksr, the API server, its etcd and the Contiv etcd")

	sections := gets(out)
	subnets := map[string]netip.Prefix{}
	for _, n := range nodes {
		var info ipam.NodeIPAMInfo
		g.Expect(json.Unmarshal([]byte(sections[n+" "+ipam.IPAMPath]), &info)).To(Succeed(), "%s's IPAM in:\n%s", n, out)
		g.Expect(info.NodeName).To(Equal(n))
		subnets[n] = netip.MustParsePrefix(info.PodSubnetThisNode)
	}
	g.Expect(subnets[nodes[0]].Overlaps(subnets[nodes[1]])).To(BeFalse(), "the agents' pod subnets %v", subnets)
	for _, n := range nodes {
		g.Expect(podsIn(g, sections[n+" "+ipam.AllocationsPath])).To(Equal(podsOf(n, demoPods(subnets))),
			"%s's allocations: exactly its pods, at the IPs the demo gave them", n)
	}
	dataDir := strings.TrimPrefix(out[0], "data directory: ")

	g.Expect(r.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	select {
	case <-r.done:
	case <-time.After(exitTimeout):
		t.Fatalf("the demo still runs %s after SIGINT", exitTimeout)
	}
	g.Expect(r.err).NotTo(HaveOccurred(), "the demo's exit status")
	var rest []string
	for line := range r.lines {
		rest = append(rest, line)
	}
	g.Expect(rest).To(ContainElement(HavePrefix("stopped")), "the demo's last words")
	g.Expect(survivors(started)).To(BeEmpty(), "processes the demo started that outlived it")
	_, err := os.Stat(dataDir)
	g.Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "the temporary data directory %q after the demo", dataDir)
}

// podsIn decodes an allocations answer: pod name -> address.
func podsIn(g Gomega, body string) map[string]string {
	var allocs struct {
		Pods []testenv.Allocation `json:"Pods"`
	}
	g.Expect(json.Unmarshal([]byte(body), &allocs)).To(Succeed(), body)
	out := map[string]string{}
	for _, al := range allocs.Pods {
		out[al.PodID.Name] = al.Addr()
	}
	return out
}

// podsOf are the demo pods of node: name -> IP.
func podsOf(node string, pods []pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		if p.node == node {
			out[p.name] = p.ip
		}
	}
	return out
}
