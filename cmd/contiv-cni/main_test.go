package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// binDir holds the contiv-cni and fake-ipam binaries built once by
// TestMain; it is the CNI_PATH of every run.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "contiv-cni-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	return m.Run()
}

func buildBinaries(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go tool is needed to build contiv-cni for the tests: %w", err)
	}
	for name, pkg := range map[string]string{PluginType: ".", "fake-ipam": "./testdata/fakeipam"} {
		out, err := exec.Command(goBin, "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return nil
}

// shortDir is a temporary directory with a short path: a unix socket
// path must fit in 108 bytes, which t.TempDir() of a long test name does
// not.
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cni")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// fakeAgent is an in-test RemoteCNI server: it records every request and
// answers with canned replies, or hangs until the call is cancelled.
type fakeAgent struct {
	cni.UnimplementedRemoteCNIServer

	mu       sync.Mutex
	calls    []string // method names, in order
	requests []*cni.CNIRequest
	gc       []*cni.GCRequest
	status   []*cni.StatusRequest
	confirms []*cni.ConfirmRequest
	replies  map[string]*cni.CNIReply
	hang     map[string]bool
}

// okAdd is the canned reply of Add: 10.1.5.2/24 via 10.1.5.1 and a
// default route.
func okAdd() *cni.CNIReply {
	return &cni.CNIReply{
		Interfaces: []*cni.CNIReply_Interface{{
			Name: "eth0",
			IpAddresses: []*cni.CNIReply_Interface_IP{{
				Version: cni.CNIReply_Interface_IP_IPV4, Address: "10.1.5.2/24", Gateway: "10.1.5.1",
			}},
		}},
		Routes: []*cni.CNIReply_Route{{Dst: "0.0.0.0/0", Gw: "10.1.5.1"}},
	}
}

func errReply(code uint32, msg string) *cni.CNIReply {
	return &cni.CNIReply{Result: cni.CNIReply_ERROR, ErrorCode: code, Error: msg}
}

// startAgent serves a fakeAgent on a unix socket and returns it and the
// socket path.
func startAgent(t testing.TB) (*fakeAgent, string) {
	t.Helper()
	sock := filepath.Join(shortDir(t), "cni.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, lis), sock
}

// serveFake serves a new fakeAgent on lis until the test ends.
func serveFake(t testing.TB, lis net.Listener) *fakeAgent {
	t.Helper()
	fa := &fakeAgent{
		replies: map[string]*cni.CNIReply{"Add": okAdd()},
		hang:    map[string]bool{},
	}
	srv := grpc.NewServer()
	cni.RegisterRemoteCNIServer(srv, fa)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return fa
}

func (fa *fakeAgent) reply(method string) *cni.CNIReply {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	fa.calls = append(fa.calls, method)
	if r, ok := fa.replies[method]; ok {
		return r
	}
	return &cni.CNIReply{}
}

func (fa *fakeAgent) set(method string, r *cni.CNIReply) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	fa.replies[method] = r
}

func (fa *fakeAgent) hangOn(method string) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	fa.hang[method] = true
}

// answer records req and replies, or waits for the caller to give up.
func (fa *fakeAgent) answer(ctx context.Context, method string) (*cni.CNIReply, error) {
	r := fa.reply(method)
	fa.mu.Lock()
	hang := fa.hang[method]
	fa.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return r, nil
}

func (fa *fakeAgent) record(req *cni.CNIRequest) {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	fa.requests = append(fa.requests, req)
}

func (fa *fakeAgent) Add(ctx context.Context, req *cni.CNIRequest) (*cni.CNIReply, error) {
	fa.record(req)
	return fa.answer(ctx, "Add")
}

func (fa *fakeAgent) Delete(ctx context.Context, req *cni.CNIRequest) (*cni.CNIReply, error) {
	fa.record(req)
	return fa.answer(ctx, "Delete")
}

func (fa *fakeAgent) Check(ctx context.Context, req *cni.CNIRequest) (*cni.CNIReply, error) {
	fa.record(req)
	return fa.answer(ctx, "Check")
}

func (fa *fakeAgent) GC(ctx context.Context, req *cni.GCRequest) (*cni.CNIReply, error) {
	fa.mu.Lock()
	fa.gc = append(fa.gc, req)
	fa.mu.Unlock()
	return fa.answer(ctx, "GC")
}

func (fa *fakeAgent) Status(ctx context.Context, req *cni.StatusRequest) (*cni.CNIReply, error) {
	fa.mu.Lock()
	fa.status = append(fa.status, req)
	fa.mu.Unlock()
	return fa.answer(ctx, "Status")
}

func (fa *fakeAgent) Confirm(ctx context.Context, req *cni.ConfirmRequest) (*cni.CNIReply, error) {
	fa.mu.Lock()
	fa.confirms = append(fa.confirms, req)
	fa.mu.Unlock()
	return fa.answer(ctx, "Confirm")
}

// Confirms returns the ConfirmRequests received so far.
func (fa *fakeAgent) Confirms() []*cni.ConfirmRequest {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	return append([]*cni.ConfirmRequest(nil), fa.confirms...)
}

// Calls returns the methods called so far, in order.
func (fa *fakeAgent) Calls() []string {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	return append([]string(nil), fa.calls...)
}

// Requests returns the CNIRequests received so far.
func (fa *fakeAgent) Requests() []*cni.CNIRequest {
	fa.mu.Lock()
	defer fa.mu.Unlock()
	return append([]*cni.CNIRequest(nil), fa.requests...)
}

// run is one execution of the binary.
type run struct {
	Command string
	Conf    string
	Env     map[string]string // overrides and extras
}

// outcome is what the binary did.
type outcome struct {
	Stdout  string
	Stderr  string
	ExitErr bool
	Elapsed time.Duration
}

// Error decodes the CNI error JSON of a failed run.
func (o outcome) Error() (*types.Error, error) {
	var e types.Error
	if err := json.Unmarshal([]byte(o.Stdout), &e); err != nil {
		return nil, fmt.Errorf("stdout %q is no CNI error: %w", o.Stdout, err)
	}
	return &e, nil
}

const (
	testContainer = "c0ffee01"
	testNetns     = "/var/run/netns/contiv-cni-test"
	testPodArgs   = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=c0ffee01"
)

// exec runs the binary with the standard CNI environment of a pod
// (overridden by r.Env; an empty value unsets a variable). A run is cut
// off after a minute: a hung plugin fails the test instead of hanging it.
func (r run) exec(t *testing.T) outcome {
	t.Helper()
	env := map[string]string{
		"CNI_COMMAND":     r.Command,
		"CNI_CONTAINERID": testContainer,
		"CNI_NETNS":       testNetns,
		"CNI_IFNAME":      "eth0",
		"CNI_PATH":        binDir,
		"CNI_ARGS":        testPodArgs,
	}
	for k, v := range r.Env {
		env[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, PluginType))
	for k, v := range env {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stdin = bytes.NewReader([]byte(r.Conf))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	o := outcome{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within a minute (stderr %q)", r.Command, o.Stderr)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running contiv-cni: %v", err)
	}
	o.ExitErr = err != nil
	return o
}

// mustSucceed runs r and fails the test unless it exits 0.
func (r run) mustSucceed(t *testing.T) string {
	t.Helper()
	o := r.exec(t)
	if o.ExitErr {
		t.Fatalf("%s failed: stdout %s stderr %s", r.Command, o.Stdout, o.Stderr)
	}
	return o.Stdout
}

// mustFail runs r, expects a non-zero exit and returns the CNI error.
func (r run) mustFail(t *testing.T) *types.Error {
	t.Helper()
	g := NewWithT(t)
	o := r.exec(t)
	g.Expect(o.ExitErr).To(BeTrue(), "%s should fail; stdout %s", r.Command, o.Stdout)
	e, err := o.Error()
	g.Expect(err).NotTo(HaveOccurred())
	return e
}

// pluginConf is a conflist-style network config of plugin mode.
func pluginConf(ver, sock string, extra string) string {
	return fmt.Sprintf(`{"cniVersion":%q,"name":"contiv-net","type":"contiv-cni","grpcServer":%q%s}`, ver, sock, extra)
}

// ipamConf is a ptp network config with contiv-cni as its IPAM.
func ipamConf(ver, sock string, extra string) string {
	return fmt.Sprintf(`{"cniVersion":%q,"name":"ptp-net","type":"ptp","ipam":{"type":"contiv-cni","grpcServer":%q%s}}`,
		ver, sock, extra)
}

var allVersions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}
