package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EnvAssets names the directory holding the etcd binary (envtest's
// variable; the Makefile exports it as _cache/kube/<version>, which `make
// kube-bins` fills). Without it the newest _cache/kube/*/etcd of the
// repository is used.
const EnvAssets = "KUBEBUILDER_ASSETS"

// processStartTimeout bounds the wait for a started process to answer.
const processStartTimeout = 30 * time.Second

// Process is an etcd server running as a child process (the etcd binary
// of the Kubernetes tests), single member, on loopback ports chosen once:
// Restart and Replace keep them, so clients reach the new process at the
// same endpoint. Its methods must be called from the test goroutine.
type Process struct {
	tb         testing.TB
	bin        string
	clientPort int
	peerPort   int
	dataDir    string
	generation int    // how many data directories were used
	token      string // --initial-cluster-token: with the ports, it makes the cluster ID

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd is reaped
	out  *syncBuffer   // the current process's output
}

// EtcdBinary returns the path of the etcd binary: $KUBEBUILDER_ASSETS/etcd,
// else the newest _cache/kube/*/etcd of the repository; the error says how
// to get one.
func EtcdBinary() (string, error) {
	if dir := os.Getenv(EnvAssets); dir != "" {
		bin := filepath.Join(dir, "etcd")
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("etcdtest: %s=%s has no etcd: %w (run `make kube-bins`)", EnvAssets, dir, err)
		}
		return bin, nil
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	found, _ := filepath.Glob(filepath.Join(root, "_cache", "kube", "*", "etcd"))
	if len(found) == 0 {
		return "", fmt.Errorf("etcdtest: no etcd binary in %s/_cache/kube/*/ and %s is not set (run `make kube-bins`)",
			filepath.Clean(root), EnvAssets)
	}
	slices.Sort(found)
	return found[len(found)-1], nil
}

// StartProcess runs the etcd binary with its data in tb.TempDir() and
// waits until it answers; it fails the test when there is no binary (see
// EtcdBinary). The process is killed at cleanup, and by the kernel if the
// test process dies.
func StartProcess(tb testing.TB) *Process {
	tb.Helper()
	bin, err := EtcdBinary()
	if err != nil {
		tb.Fatal(err)
	}
	p := &Process{tb: tb, bin: bin, clientPort: freePort(tb), peerPort: freePort(tb), token: "etcdtest"}
	p.newDataDir()
	tb.Cleanup(p.Stop)
	p.start()
	return p
}

// Endpoint is the client address, "127.0.0.1:<port>".
func (p *Process) Endpoint() string { return "127.0.0.1:" + strconv.Itoa(p.clientPort) }

// Stop kills the process (SIGKILL, a crash: nothing is flushed beyond what
// etcd already synced) and waits for it. Stopping a stopped process does
// nothing.
func (p *Process) Stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart stops the process and starts it again on the same data and
// ports.
func (p *Process) Restart() {
	p.tb.Helper()
	p.Stop()
	p.start()
}

// Replace stops the process and starts a new one on the same ports with
// an empty data directory: the same endpoint now serves an empty store
// whose revision starts again at 1, with the same cluster ID (the ID
// derives from the member's name, peer URL and cluster token): what a
// wiped member, or one restored from an old snapshot with its old flags,
// looks like to a client.
func (p *Process) Replace() {
	p.tb.Helper()
	p.Stop()
	p.newDataDir()
	p.start()
}

// ReplaceCluster is Replace with another cluster token, hence another
// cluster ID: another cluster behind the same endpoint.
func (p *Process) ReplaceCluster() {
	p.tb.Helper()
	p.Stop()
	p.newDataDir()
	p.token = "etcdtest-" + strconv.Itoa(p.generation)
	p.start()
}

// Client returns a new raw client of the process, closed by tb.Cleanup.
func (p *Process) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return newClient(tb, p.Endpoint())
}

// Output is what the current (or last) process wrote.
func (p *Process) Output() string {
	p.mu.Lock()
	out := p.out
	p.mu.Unlock()
	if out == nil {
		return ""
	}
	return out.String()
}

func (p *Process) newDataDir() {
	p.generation++
	p.dataDir = filepath.Join(p.tb.TempDir(), "etcd-data-"+strconv.Itoa(p.generation))
}

// start runs the binary and waits until a client can read from it.
func (p *Process) start() {
	p.tb.Helper()
	client := "http://127.0.0.1:" + strconv.Itoa(p.clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(p.peerPort)
	cmd := exec.Command(p.bin, "--name", "etcdtest", "--data-dir", p.dataDir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcdtest="+peer, "--initial-cluster-token", p.token,
		"--unsafe-no-fsync", "--log-level", "warn")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		p.tb.Fatalf("etcdtest: start %s: %v", p.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done, p.out = cmd, done, out
	p.mu.Unlock()
	if err := p.waitReady(done); err != nil {
		p.Stop()
		p.tb.Fatalf("etcdtest: etcd process on %s: %v\n%s", p.Endpoint(), err, out.String())
	}
}

// waitReady reads a key until it succeeds, the process exits or
// processStartTimeout passes.
func (p *Process) waitReady(exited <-chan struct{}) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint()}, DialTimeout: time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	deadline := time.Now().Add(processStartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "/")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited while starting")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %s: %w", processStartTimeout, err)
		}
	}
}

// freePort returns a loopback port that nothing listens on right now.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a bytes.Buffer the process writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
