// Package testenv runs the real contiv-agent binary for the suites under
// tests/: it builds the binaries once per test process, writes a config
// directory from the conf/ samples with loopback ports chosen by the
// kernel and every path inside a temporary directory, starts the agent
// with an embedded etcd, and waits until it is ready. An Agent can be
// killed (SIGKILL) and started again on the same directory, as a node
// would be after a crash. Build, AgentConfig, AgentEnv and WriteConfig
// need no testing.T: tests/cluster (and through it `make demo`) uses them
// to run agents on a shared etcd.
//
// Owner: each Agent belongs to the test goroutine that started it; its
// log reader goroutine only forwards lines. Caller duties: call Main from
// TestMain (it builds the binaries and removes them at the end).
package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bins are the binaries built by Main.
type Bins struct {
	Dir   string // the directory holding them (a CNI_PATH entry)
	Agent string // contiv-agent
	CNI   string // contiv-cni
	KSR   string // contiv-ksr
	// NetCtl is contiv-netctl.
	NetCtl string
}

var bins Bins

// Main builds the binaries (Build) into a temporary directory, runs the
// tests and removes the directory.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "contiv-testenv")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(2)
	}
	if bins, err = Build(dir); err != nil {
		_ = os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(2)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// BenchMain is Main for a package of benchmarks: it builds the binaries
// only when benchmarks are asked for (-test.bench), so that the plain
// test run, which has nothing to exec, builds nothing.
func BenchMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	Main(m)
}

// Build builds contiv-agent (with the faults tag), contiv-cni (static,
// CGO_ENABLED=0), contiv-ksr and contiv-netctl into dir with the go command of PATH; the
// compiler's output goes to stderr.
func Build(dir string) (Bins, error) {
	b := Bins{Dir: dir, Agent: filepath.Join(dir, "contiv-agent"), CNI: filepath.Join(dir, "contiv-cni"),
		KSR: filepath.Join(dir, "contiv-ksr"), NetCtl: filepath.Join(dir, "contiv-netctl")}
	for _, t := range []struct{ out, pkg string }{{b.Agent, "cmd/contiv-agent"}, {b.CNI, "cmd/contiv-cni"}, {b.KSR, "cmd/contiv-ksr"},
		{b.NetCtl, "cmd/contiv-netctl"}} {
		args := []string{"build", "-o", t.out}
		if t.out == b.Agent {
			// With bolt's fault injection (infra/kvdb/bolt/faults.go):
			// inert unless a test sets bolt.StallEnv.
			args = append(args, "-tags", "faults")
		}
		build := exec.Command("go", append(args, "./"+t.pkg)...)
		build.Dir = RepoRoot()
		if t.out == b.CNI {
			// As the image ships it (make static): a static binary starts
			// about 0.5 ms faster, without the dynamic loader and libc.
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return Bins{}, fmt.Errorf("building %s: %w", t.pkg, err)
		}
	}
	return b, nil
}

// Binaries returns what Main built.
func Binaries() Bins { return bins }

// RepoRoot is the root of the repository (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Tool returns the path of a tool `make test-deps` installs into ./bin
// (cnitool); the test fails, naming the make target, when it is missing.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing (%v): run `make test-deps` first", p, err)
	}
	return p
}

// Options shape an agent.
type Options struct {
	// Node is the node name (MICROSERVICE_LABEL); default "testenv-node".
	Node string
	// Conf replaces or adds config files of the directory by name
	// ("contiv.conf": "..."); the defaults come from conf/.
	Conf map[string]string
	// Env adds environment variables.
	Env []string
	// BasicAuth, "user:password", makes the REST server require it
	// (client-basic-auth in http.conf, unless Conf names http.conf) and
	// the helpers (the readiness wait, Get) send it.
	BasicAuth string
}

// Agent is a contiv-agent process on a config directory.
type Agent struct {
	Dir    string // the config directory (CONFIG_DIR) and data
	Socket string // the CNI gRPC socket
	REST   string // the REST base URL, "http://127.0.0.1:port"; set once ready

	opts  Options
	cmd   *exec.Cmd
	lines chan map[string]any
	done  chan error
	logs  *os.File
	// ended: the exit status of the current run was received from done
	// (owned by the test goroutine, like every field of Agent).
	ended   bool
	exitErr error
}

// StartAgent writes a config directory in t.TempDir() and starts the
// agent on it; it returns once /readiness answers 200.
func StartAgent(t testing.TB, opts Options) *Agent {
	t.Helper()
	a := newAgent(t, opts)
	a.Start(t)
	t.Cleanup(func() { a.Kill(t) })
	return a
}

// newAgent writes a config directory in t.TempDir() for opts.
func newAgent(t testing.TB, opts Options) *Agent {
	t.Helper()
	if opts.Node == "" {
		opts.Node = "testenv-node"
	}
	dir := t.TempDir()
	a := &Agent{Dir: dir, Socket: filepath.Join(dir, "cni.sock"), opts: opts}
	a.writeConfig(t)
	return a
}

// writeConfig copies the conf/ samples with loopback port 0, paths in
// a.Dir, then opts.Conf over them.
func (a *Agent) writeConfig(t testing.TB) {
	t.Helper()
	files, err := AgentConfig(a.Dir, a.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if a.opts.BasicAuth != "" {
		files["http.conf"] += fmt.Sprintf("client-basic-auth: [%q]\n", a.opts.BasicAuth)
	}
	for name, content := range a.opts.Conf {
		files[name] = content
	}
	if err := WriteConfig(a.Dir, files); err != nil {
		t.Fatal(err)
	}
}

// AgentConfig returns the config files of an agent whose directory is
// dir, by file name: the conf/ samples, the REST server on a loopback port
// the kernel chooses, an embedded etcd and the bolt file in dir, and the
// CNI socket at socket.
func AgentConfig(dir, socket string) (map[string]string, error) {
	files := map[string]string{}
	for _, name := range []string{"logmanager.conf", "health.conf", "metrics.conf", "controller.conf", "contiv.conf", "ipam.conf"} {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), "conf", name))
		if err != nil {
			return nil, err
		}
		files[name] = string(data)
	}
	files["http.conf"] = "endpoint: 127.0.0.1:0\n"
	files["etcd.conf"] = "embedded: true\nembedded-data-dir: " + filepath.Join(dir, "etcd") +
		"\nembedded-client-url: http://127.0.0.1:0\nembedded-peer-url: http://127.0.0.1:0\n"
	files["bolt.conf"] = "db-path: " + filepath.Join(dir, "data", "bolt.db") + "\n"
	files["podmanager.conf"] = "socketPath: " + socket + "\n"
	return files, nil
}

// WriteConfig writes files (name -> content) into dir.
func WriteConfig(dir string, files map[string]string) error {
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Start runs the agent on its directory (again, after Kill or Stop) and
// waits until it is ready.
func (a *Agent) Start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(bins.Agent)
	cmd.Dir = a.Dir
	cmd.Env = a.env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs, err := os.OpenFile(filepath.Join(a.Dir, "agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a.cmd, a.logs, a.ended, a.exitErr = cmd, logs, false, nil
	a.lines, a.done = make(chan map[string]any, 4096), make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go run{cmd: cmd, logs: logs, lines: a.lines, done: a.done}.readLog(stderr)
	a.REST = a.waitReady(t)
}

// env is the environment of the agent process.
func (a *Agent) env() []string { return append(AgentEnv(a.Dir, a.opts.Node), a.opts.Env...) }

// AgentEnv is the environment of an agent on the config directory dir
// serving node: this process's environment with JSON logs, the node name,
// no overrides of the config files, and a short presence TTL.
func AgentEnv(dir, node string) []string {
	return append(os.Environ(), "CONFIG_DIR="+dir, "LOG_FORMAT=json",
		"MICROSERVICE_LABEL="+node, "HTTP_PORT=", "ETCD_ENDPOINTS=", "INITIAL_LOGLVL=",
		// A killed agent's presence lease blocks its restart for a TTL.
		"NODESYNC_PRESENCE_TTL=2s")
}

// refuseTimeout bounds StartRefused: an agent still running then has
// accepted the config.
const refuseTimeout = 60 * time.Second

// StartRefused writes a config directory like StartAgent and runs the
// agent on it, expecting it to refuse the config and exit: it returns
// everything the agent wrote to stderr and the exit error. The test fails
// when the agent is still running after refuseTimeout (it accepted the
// config).
func StartRefused(t testing.TB, opts Options) (logs string, exit error) {
	t.Helper()
	a := newAgent(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), refuseTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Agent)
	cmd.Dir, cmd.Env = a.Dir, a.env()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the agent still ran %v after start: it accepted the config; its output: %s", refuseTimeout, out)
	}
	return string(out), err
}

// run is one run of the agent process. Start makes a new one; the log
// reader goroutine of a run touches only its own run, never the Agent,
// whose fields the next Start replaces.
type run struct {
	cmd   *exec.Cmd
	logs  *os.File
	lines chan map[string]any
	done  chan error
}

// readLog keeps every log line in agent.log, forwards the parsed ones
// and then the exit status (after the log file is closed, so that a Start
// after it never meets this run's file).
func (r run) readLog(stderr io.Reader) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		_, _ = r.logs.Write(append(sc.Bytes(), '\n'))
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			rec = map[string]any{"msg": sc.Text()}
		}
		select {
		case r.lines <- rec:
		default:
		}
	}
	close(r.lines)
	err := r.cmd.Wait()
	_ = r.logs.Close()
	r.done <- err
}

// waitReady returns the REST base from the "agent ready" line, after
// /readiness answers 200.
func (a *Agent) waitReady(t testing.TB) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case rec, ok := <-a.lines:
			if !ok {
				t.Fatalf("agent exited before it was ready: %v; log in %s", a.wait(), a.LogPath())
			}
			if rec["msg"] == "agent ready" {
				base := strings.TrimSuffix(fmt.Sprint(rec["rest"]), "/")
				a.waitReadiness(t, base)
				go drain(a.lines)
				return base
			}
		case <-timeout:
			t.Fatalf("agent not ready after 60s; log in %s", a.LogPath())
		}
	}
}

func drain(ch <-chan map[string]any) {
	for range ch {
	}
}

// waitReadiness polls /readiness until 200.
func (a *Agent) waitReadiness(t testing.TB, base string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	last := "no answer"
	for time.Now().Before(deadline) {
		resp, err := client.Do(a.request(t, base+"/readiness"))
		if err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s/readiness not 200 within 60s (last: %s); log in %s, its last warnings and errors:\n%s",
		base, last, a.LogPath(), strings.Join(a.lastProblems(20), "\n"))
}

// lastProblems returns the last n log lines at warning or error level (the
// temporary directory of a failed test is gone once it ends).
func (a *Agent) lastProblems(n int) []string {
	data, err := os.ReadFile(a.LogPath())
	if err != nil {
		return []string{err.Error()}
	}
	var hits []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			hits = append(hits, line)
		}
	}
	return hits[max(0, len(hits)-n):]
}

// LogPath is the file holding every log line of every run of the agent.
func (a *Agent) LogPath() string { return filepath.Join(a.Dir, "agent.log") }

// Running tells whether the process runs. It never reads the process
// state that the run's log reader writes: a run has ended once its exit
// status arrived on done.
func (a *Agent) Running() bool {
	if a.cmd == nil || a.ended {
		return false
	}
	select {
	case err := <-a.done:
		a.ended, a.exitErr = true, err
		return false
	default:
		return true
	}
}

// wait waits for the end of the current run and returns its exit error.
func (a *Agent) wait() error {
	if !a.ended {
		a.ended, a.exitErr = true, <-a.done
	}
	return a.exitErr
}

// Kill sends SIGKILL and waits for the process to end; a stopped agent is
// left alone.
func (a *Agent) Kill(t testing.TB) {
	t.Helper()
	if !a.Running() {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	_ = a.wait()
}

// Stop sends SIGINT and returns the exit error (nil for exit 0).
func (a *Agent) Stop(t testing.TB) error {
	t.Helper()
	if !a.Running() {
		return a.exitErr
	}
	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		a.ended, a.exitErr = true, err
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("agent did not stop 30s after SIGINT; log in %s", a.LogPath())
		return nil
	}
}

// request is GET url with the agent's basic authentication, if any.
func (a *Agent) request(t testing.TB, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user, pass, ok := strings.Cut(a.opts.BasicAuth, ":"); ok {
		req.SetBasicAuth(user, pass)
	}
	return req
}

// Get fetches a REST path and returns the status and the body.
func (a *Agent) Get(t testing.TB, path string) (int, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(a.request(t, a.REST+path))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// Allocation is one entry of GET /contiv/v1/ipam/allocations, decoded
// from the wire with the field names a REST client sees.
type Allocation struct {
	PodID struct {
		Name      string `json:"Name"`
		Namespace string `json:"Namespace"`
	} `json:"PodID"`
	MainIP      string `json:"MainIP"`
	Network     string `json:"network"`
	ContainerID string `json:"containerId"`
	IfName      string `json:"ifName"`
}

// Addr is MainIP without a prefix length, if it carries one.
func (al Allocation) Addr() string { return strings.Split(al.MainIP, "/")[0] }

// Allocations reads the agent's allocations over REST.
func (a *Agent) Allocations(t testing.TB) []Allocation {
	t.Helper()
	code, body := a.Get(t, "/contiv/v1/ipam/allocations")
	if code != http.StatusOK {
		t.Fatalf("GET /contiv/v1/ipam/allocations: %d %s", code, body)
	}
	var out struct {
		Pods []Allocation `json:"Pods"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET /contiv/v1/ipam/allocations: %v in %s", err, body)
	}
	return out.Pods
}

// LogMentions returns the log lines of every run that contain any of the
// words (case-insensitive), e.g. "panic", "fatal".
func (a *Agent) LogMentions(t testing.TB, words ...string) []string {
	t.Helper()
	data, err := os.ReadFile(a.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var hits []string
	for _, line := range strings.Split(string(data), "\n") {
		low := strings.ToLower(line)
		for _, w := range words {
			if strings.Contains(low, strings.ToLower(w)) {
				hits = append(hits, line)
				break
			}
		}
	}
	return hits
}

// DualStackConf is conf/contiv-dualstack.conf with small pod subnets: a
// /28 per node of 10.1.0.0/16 (node ID 1: 10.1.0.16/28) and a /120 per
// node of fd00:10:1::/112 (node ID 1: fd00:10:1::100/120).
func DualStackConf(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "conf", "contiv-dualstack.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(data)
	for _, r := range []struct{ old, new string }{
		{"  podSubnetOneNodePrefixLen: 24", "  podSubnetOneNodePrefixLen: 28"},
		{"    podSubnetCIDR: fd00:10:1::/48", "    podSubnetCIDR: fd00:10:1::/112"},
		{"    podSubnetOneNodePrefixLen: 64", "    podSubnetOneNodePrefixLen: 120"},
	} {
		if !strings.Contains(conf, r.old+" ") && !strings.Contains(conf, r.old+"\n") {
			t.Fatalf("conf/contiv-dualstack.conf no longer says %q; update testenv.DualStackConf", strings.TrimSpace(r.old))
		}
		conf = strings.Replace(conf, r.old, r.new, 1)
	}
	return conf
}
