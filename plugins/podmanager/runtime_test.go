package podmanager_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// fakeCRI is a CRI runtime service on a real unix socket, served with
// the official API: Version and ListPodSandbox, which can stall as a
// runtime under load does.
type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu      sync.Mutex
	sbs     []*runtimeapi.PodSandbox
	stalled chan struct{} // non-nil: ListPodSandbox waits until it is closed (or the call ends)
	srv     *grpc.Server
}

func startCRI(t *testing.T, path string, sbs ...*runtimeapi.PodSandbox) *fakeCRI {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCRI{sbs: sbs, srv: grpc.NewServer()}
	runtimeapi.RegisterRuntimeServiceServer(f.srv, f)
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *fakeCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeCRI) ListPodSandbox(ctx context.Context, _ *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	stalled, sbs := f.stalled, f.sbs
	f.mu.Unlock()
	if stalled != nil {
		select {
		case <-stalled:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &runtimeapi.ListPodSandboxResponse{Items: sbs}, nil
}

func (f *fakeCRI) set(stalled chan struct{}, sbs ...*runtimeapi.PodSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalled, f.sbs = stalled, sbs
}

func criSandbox(id, pod, uid string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{Id: id, State: state,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: pod, Namespace: "default", Uid: uid}}
}

// witnessLook is one LookAtRuntime: what the list returned.
type witnessLook struct {
	sbs []podmanager.Sandbox
	err error
}

// fakeWitness is fakeIPAM that also takes the runtime's lists.
type fakeWitness struct {
	*fakeIPAM
	mu       sync.Mutex
	gcPeriod time.Duration
	used     bool
	looks    chan witnessLook
}

func (w *fakeWitness) UseRuntime(gc time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.used, w.gcPeriod = true, gc
	return nil
}

func (w *fakeWitness) LookAtRuntime(ctx context.Context, list func(context.Context) ([]podmanager.Sandbox, error)) error {
	sbs, err := list(ctx)
	select {
	case w.looks <- witnessLook{sbs, err}:
	default:
	}
	return nil
}

func criConf(socket string) func(*stackOpts) {
	return func(o *stackOpts) {
		o.conf.CRISocket = socket
		o.conf.CRITimeout, o.conf.CRIListPeriod, o.conf.CRIGCPeriod = 300*time.Millisecond, 50*time.Millisecond, 7*time.Second
		o.witness = true
	}
}

// At start the local pods are rebuilt from the runtime's ready sandboxes,
// and a new container of such a pod replaces it (its old attachments
// are IPAM's to release) instead of failing as an obsolete pod forever.
func TestTheLocalPodsAreRebuiltFromTheRuntime(t *testing.T) {
	g := NewWithT(t)
	sock := filepath.Join(t.TempDir(), "cri.sock")
	startCRI(t, sock, criSandbox("sb1", "web", "uid-1", runtimeapi.PodSandboxState_SANDBOX_READY),
		criSandbox("sb2", "old", "uid-2", runtimeapi.PodSandboxState_SANDBOX_NOTREADY))
	s := startStack(t, criConf(sock))
	pods := s.pm.GetLocalPods()
	g.Expect(pods).To(HaveLen(1), "only the ready sandbox: a stopped one's network is gone or going")
	web := pods[podmodel.ID{Name: "web", Namespace: "default"}]
	g.Expect(web).NotTo(BeNil())
	g.Expect(web.ContainerID).To(Equal("sb1"))
	g.Expect(web.UID).To(Equal("uid-1"))
	g.Expect(s.witness.used).To(BeTrue(), "IPAM was told to use the runtime")
	g.Expect(s.witness.gcPeriod).To(Equal(7 * time.Second))

	reply, err := s.client.Add(ctx(t), addRequest("sb3", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(BeZero(), reply.GetError())
	g.Expect(s.pm.GetLocalPods()[podmodel.ID{Name: "web", Namespace: "default"}].ContainerID).To(Equal("sb3"))
}

// A rebuilt pod without attachments goes with its sandbox's DEL.
func TestARebuiltPodGoesWithItsDelete(t *testing.T) {
	g := NewWithT(t)
	sock := filepath.Join(t.TempDir(), "cri.sock")
	startCRI(t, sock, criSandbox("sb1", "web", "uid-1", runtimeapi.PodSandboxState_SANDBOX_READY))
	s := startStack(t, criConf(sock))
	g.Expect(s.pm.GetLocalPods()).To(HaveLen(1))
	req := addRequest("sb1", "web")
	reply, err := s.client.Delete(ctx(t), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(BeZero(), reply.GetError())
	g.Expect(s.pm.GetLocalPods()).To(BeEmpty())
}

// The runtime is listed every criListPeriod and each list reaches IPAM;
// a runtime that is not there yet, or stalls past criTimeout, is an error
// (IPAM then releases nothing by absence), counted and shown by the gauge;
// one that comes up is connected at the next look.
func TestTheRuntimeIsListedAndItsFailuresAreErrors(t *testing.T) {
	g := NewWithT(t)
	sock := filepath.Join(t.TempDir(), "cri.sock")
	s := startStack(t, criConf(sock)) // nothing serves the socket yet
	g.Expect(s.pm.GetLocalPods()).To(BeEmpty())
	first := <-s.witness.looks
	g.Expect(first.err).To(MatchError(ContainSubstring(sock)), "the error names the socket")
	g.Expect(s.reg.gauge(t, "contiv_podmanager_runtime_up")).To(BeZero())

	cri := startCRI(t, sock, criSandbox("sb1", "web", "uid-1", runtimeapi.PodSandboxState_SANDBOX_READY))
	g.Eventually(func() []podmanager.Sandbox { return nextLook(t, s).sbs }).WithTimeout(5 * time.Second).Should(Equal(
		[]podmanager.Sandbox{{ID: "sb1", Pod: podmodel.ID{Name: "web", Namespace: "default"}, UID: "uid-1", Ready: true}}))
	g.Expect(s.reg.gauge(t, "contiv_podmanager_runtime_up")).To(Equal(1.0))

	stall := make(chan struct{})
	defer close(stall)
	cri.set(stall)
	g.Eventually(func() error { return nextLook(t, s).err }).WithTimeout(5*time.Second).Should(
		MatchError(ContainSubstring("DeadlineExceeded")), "a stalled runtime: criTimeout")
	g.Expect(s.reg.gauge(t, "contiv_podmanager_runtime_up")).To(BeZero())
}

func nextLook(t *testing.T, s *stack) witnessLook {
	select {
	case l := <-s.witness.looks:
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no look at the runtime for 5s")
		return witnessLook{err: errors.New("none")}
	}
}
