package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentBinary is built once by TestMain.
var agentBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "contiv-agent-e2e")
	if err != nil {
		panic(err)
	}
	agentBinary = filepath.Join(dir, "contiv-agent")
	build := exec.Command("go", "build", "-o", agentBinary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		_ = os.RemoveAll(dir)
		panic("building contiv-agent: " + err.Error())
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// agentProc is a running contiv-agent binary with its JSON log.
type agentProc struct {
	cmd   *exec.Cmd
	lines chan map[string]any
	done  chan error
	start time.Time
}

// writeRunConfig writes the conf/ samples into dir with every port set to 0
// and every path inside dir.
func writeRunConfig(t *testing.T, dir, httpEndpoint string) {
	t.Helper()
	for _, name := range []string{"logmanager.conf", "health.conf", "metrics.conf", "controller.conf", "contiv.conf"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "conf", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), string(data))
	}
	writeFile(t, filepath.Join(dir, "http.conf"), "endpoint: "+httpEndpoint+"\n")
	writeFile(t, filepath.Join(dir, "etcd.conf"), "embedded: true\n"+
		"embedded-data-dir: "+filepath.Join(dir, "etcd")+"\n"+
		"embedded-client-url: http://127.0.0.1:0\nembedded-peer-url: http://127.0.0.1:0\n")
	writeFile(t, filepath.Join(dir, "bolt.conf"), "db-path: "+filepath.Join(dir, "data", "bolt.db")+"\n")
	writeFile(t, filepath.Join(dir, "podmanager.conf"), "socketPath: "+filepath.Join(dir, "cni.sock")+"\n")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startAgent runs the binary in dir with CONFIG_DIR=dir and JSON logs;
// env adds or overrides environment variables.
func startAgent(t *testing.T, dir string, env ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(agentBinary)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CONFIG_DIR="+dir, "LOG_FORMAT=json",
		"MICROSERVICE_LABEL=e2e-node", "HTTP_PORT=", "ETCD_ENDPOINTS=", "INITIAL_LOGLVL=")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &agentProc{cmd: cmd, lines: make(chan map[string]any, 1024), done: make(chan error, 1)}
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.readLog(t, stderr)
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// readLog forwards each JSON log line and then the exit status.
func (p *agentProc) readLog(t *testing.T, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		t.Log(sc.Text())
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			rec = map[string]any{"msg": sc.Text()}
		}
		select {
		case p.lines <- rec:
		default:
		}
	}
	close(p.lines)
	p.done <- p.cmd.Wait()
}

// waitReady returns the REST base URL from the "agent ready" log line.
func (p *agentProc) waitReady(t *testing.T) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case rec, ok := <-p.lines:
			if !ok {
				t.Fatalf("agent exited before it was ready: %v", <-p.done)
			}
			if rec["msg"] == "agent ready" {
				url, _ := rec["rest"].(string)
				return strings.TrimSuffix(url, "/")
			}
		case <-timeout:
			t.Fatal("agent not ready after 30s")
		}
	}
}

// waitLine returns the first log record that match accepts, within
// timeout; earlier records are consumed.
func (p *agentProc) waitLine(t *testing.T, what string, timeout time.Duration, match func(rec map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case rec, ok := <-p.lines:
			if !ok {
				t.Fatalf("agent exited before logging %s: %v", what, <-p.done)
			}
			if match(rec) {
				return rec
			}
		case <-deadline:
			t.Fatalf("agent did not log %s within %v", what, timeout)
		}
	}
}

// stop sends SIGINT and returns the exit error (nil for exit 0).
func (p *agentProc) stop(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range p.lines {
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not stop 20s after SIGINT")
		return nil
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestAgentBinaryServesAndStopsOnSIGINT runs the real binary with the
// shipped samples on free loopback ports: it must serve the index, the
// probes and the metrics, and exit 0 on SIGINT.
func TestAgentBinaryServesAndStopsOnSIGINT(t *testing.T) {
	dir := t.TempDir()
	writeRunConfig(t, dir, "127.0.0.1:0")
	p := startAgent(t, dir)
	base := p.waitReady(t)
	t.Logf("time to REST up: %v", time.Since(p.start))
	waitReadiness(t, base)
	t.Logf("time to /readiness 200 (first DB resync processed): %v", time.Since(p.start))
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("REST base %q, want loopback", base)
	}

	status, body := httpGet(t, base+"/")
	if status != http.StatusOK {
		t.Errorf("GET / = %d", status)
	}
	for _, path := range []string{"/liveness", "/readiness", "/metrics", "/log/list"} {
		if !strings.Contains(body, `"path": "`+path+`"`) {
			t.Errorf("index lacks %s:\n%s", path, body)
		}
	}
	checkDocsListEndpoints(t, body)
	checkNodeAddresses(t, base)
	for _, path := range []string{"/liveness", "/readiness"} {
		status, body = httpGet(t, base+path)
		if status != http.StatusOK || !strings.Contains(body, `"state": "ok"`) {
			t.Errorf("GET %s = %d %s, want 200 and state ok", path, status, body)
		}
	}
	status, body = httpGet(t, base+"/metrics")
	if status != http.StatusOK || !strings.Contains(body, "agent_health 0") {
		t.Errorf("GET /metrics = %d, want 200 with agent_health 0:\n%.500s", status, body)
	}

	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGINT: %v, want 0", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "bolt.db")); err != nil {
		t.Errorf("bolt file: %v", err)
	}
}

// TestAgentBinaryFailsOnTakenPort checks that a REST port in use fails
// start-up with exit 1 and an error naming the address.
func TestAgentBinaryFailsOnTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	dir := t.TempDir()
	writeRunConfig(t, dir, ln.Addr().String())
	p := startAgent(t, dir)
	var msgs []string
	for rec := range p.lines {
		msgs = append(msgs, rec["msg"].(string))
	}
	err = <-p.done
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	last := msgs[len(msgs)-1]
	if !strings.Contains(last, ln.Addr().String()) {
		t.Errorf("last line %q does not name %s", last, ln.Addr())
	}
}

// restAPIDoc is the REST reference: a table row per endpoint.
const restAPIDoc = "docs/rest-api.md"

// checkDocsListEndpoints checks that the REST reference (docs/rest-api.md)
// has a table row for every endpoint in the index body.
func checkDocsListEndpoints(t *testing.T, index string) {
	t.Helper()
	var body struct {
		Endpoints []struct{ Method, Path string }
	}
	if err := json.Unmarshal([]byte(index), &body); err != nil {
		t.Fatalf("index: %v", err)
	}
	if len(body.Endpoints) < 6 {
		t.Fatalf("index lists %d endpoints, want at least 6", len(body.Endpoints))
	}
	doc := readDoc(t, restAPIDoc)
	for _, ep := range body.Endpoints {
		if !strings.Contains(doc, "| "+ep.Method+" | `"+ep.Path+"` |") {
			t.Errorf("%s REST table lacks | %s | `%s` |", restAPIDoc, ep.Method, ep.Path)
		}
	}
}

// waitReadiness polls /readiness until it answers 200 (the controller is
// ready once its first DB resync is processed).
func waitReadiness(t *testing.T, base string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(base + "/readiness")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("/readiness not 200 within 20s")
}

// checkNodeAddresses checks that the agent claimed node ID 1 in its fresh
// etcd and serves the addresses derived from conf/contiv.conf.
func checkNodeAddresses(t *testing.T, base string) {
	t.Helper()
	status, body := httpGet(t, base+"/contiv/v1/ipam")
	if status != http.StatusOK {
		t.Fatalf("GET /contiv/v1/ipam = %d %s", status, body)
	}
	for _, want := range []string{`"nodeId": 1`, `"nodeName": "e2e-node"`, `"nodeIP": "192.168.16.1"`,
		`"podSubnetThisNode": "10.1.1.0/24"`, `"vppHostNetwork": "172.30.1.0/24"`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /contiv/v1/ipam lacks %s:\n%s", want, body)
		}
	}
}

// TestSecondAgentWithTheSameNameStaysUnready runs two agents labelled
// e2e-node against one etcd (the first one's embedded server): the first
// serves node ID 1, the second refuses the name, naming the first agent's
// process, and never turns ready.
func TestSecondAgentWithTheSameNameStaysUnready(t *testing.T) {
	const ttl = "NODESYNC_PRESENCE_TTL=2s" // the second agent waits this long (plus a margin) before refusing
	dir1 := t.TempDir()
	writeRunConfig(t, dir1, "127.0.0.1:0")
	first := startAgent(t, dir1, ttl)
	started := first.waitLine(t, "the embedded etcd start", 30*time.Second, func(rec map[string]any) bool {
		return rec["msg"] == "embedded etcd server started"
	})
	etcdURL, _ := started["client-url"].(string)
	base1 := first.waitReady(t)
	waitReadiness(t, base1)

	dir2 := t.TempDir()
	writeRunConfig(t, dir2, "127.0.0.1:0")
	writeFile(t, filepath.Join(dir2, "etcd.conf"), "endpoints: ["+strconv.Quote(etcdURL)+"]\n")
	second := startAgent(t, dir2, ttl)
	base2 := second.waitReady(t)
	refused := second.waitLine(t, "the refusal", 30*time.Second, func(rec map[string]any) bool {
		err, _ := rec["err"].(string)
		return rec["level"] == "ERROR" && strings.Contains(err, "node name taken")
	})
	msg := refused["err"].(string)
	for _, want := range []string{`node name "e2e-node" is served by another live agent`,
		fmt.Sprintf(`"pid":%d`, first.cmd.Process.Pid)} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q lacks %s", msg, want)
		}
	}
	if status, body := httpGet(t, base2+"/readiness"); status == http.StatusOK {
		t.Errorf("second agent: GET /readiness = 200 %s, want not ready", body)
	}
	if status, body := httpGet(t, base1+"/contiv/v1/ipam"); status != http.StatusOK || !strings.Contains(body, `"nodeId": 1`) {
		t.Errorf("first agent: GET /contiv/v1/ipam = %d %s, want node ID 1", status, body)
	}
	if err := second.stop(t); err != nil {
		t.Errorf("second agent exit after SIGINT: %v", err)
	}
	if err := first.stop(t); err != nil {
		t.Errorf("first agent exit after SIGINT: %v", err)
	}
}
