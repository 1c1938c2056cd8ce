package podmanager_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// socketAt is the stack option that puts the socket at path.
func socketAt(path string) func(*stackOpts) {
	return func(o *stackOpts) { o.conf.SocketPath = path }
}

func TestSocketIsPrivateAndRemovedAtClose(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)

	fi, err := os.Lstat(s.socket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Type()).To(Equal(os.ModeSocket))
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	dir, err := os.Stat(filepath.Dir(s.socket))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dir.Mode().Perm()).To(Equal(os.FileMode(0o700)), "the missing directory is created private")
	entries, err := os.ReadDir(filepath.Dir(s.socket))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "the private directory of the creation is gone")
	g.Expect(s.pm.SocketPath()).To(Equal(s.socket))
	state, _ := s.health.Last()
	g.Expect(state).To(Equal(health.OK))

	g.Expect(s.stop()).To(Succeed())
	_, err = os.Lstat(s.socket)
	g.Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "socket removed: %v", err)
	state, _ = s.health.Last()
	g.Expect(state).To(Equal(health.Error))
}

func TestStaleSocketIsReplaced(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "cni.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	g.Expect(err).NotTo(HaveOccurred())
	ln.SetUnlinkOnClose(false)
	g.Expect(ln.Close()).To(Succeed()) // the file stays, nobody accepts: a killed agent's socket
	// A second link keeps the stale socket's inode alive: tmpfs would
	// otherwise hand its number to the new socket at once, and the two
	// could not be told apart.
	keep := path + ".stale"
	g.Expect(os.Link(path, keep)).To(Succeed())
	before, err := os.Lstat(keep)
	g.Expect(err).NotTo(HaveOccurred())

	s := startStack(t, socketAt(path))
	after, err := os.Lstat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(before, after)).To(BeFalse(), "a new socket replaced the stale one")
	g.Expect(after.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	reply, err := s.client.Status(ctx(t), &cni.StatusRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
}

func TestLiveSocketFailsTheStart(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "cni.sock")
	ln, err := net.Listen("unix", path) // another agent
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = ln.Close() }()
	before, err := os.Lstat(path)
	g.Expect(err).NotTo(HaveOccurred())

	o := stackOpts{conf: podmanager.DefaultConfig()}
	o.conf.SocketPath = path
	_, err = tryStartStack(t, o)
	g.Expect(err).To(MatchError(podmanager.ErrSocketInUse))
	g.Expect(err).To(MatchError(And(ContainSubstring(path), ContainSubstring("another agent serves it"))))
	after, err := os.Lstat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(before, after)).To(BeTrue(), "the live socket is left alone")
}

func TestPathThatIsNotASocketFailsTheStartAndIsKept(t *testing.T) {
	cases := []struct {
		name   string
		create func(t *testing.T, path string)
		kind   string
	}{
		{"regular file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "regular file"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "directory"},
		{"symlink", func(t *testing.T, path string) {
			if err := os.Symlink("/nowhere", path); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "cni.sock")
			tc.create(t, path)
			before, err := os.Lstat(path)
			g.Expect(err).NotTo(HaveOccurred())

			o := stackOpts{conf: podmanager.DefaultConfig()}
			o.conf.SocketPath = path
			_, err = tryStartStack(t, o)
			g.Expect(err).To(MatchError(podmanager.ErrNotSocket))
			g.Expect(err).To(MatchError(And(ContainSubstring(path), ContainSubstring(tc.kind))))
			after, err := os.Lstat(path)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(os.SameFile(before, after)).To(BeTrue())
			if tc.name == "regular file" {
				data, err := os.ReadFile(path)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(data)).To(Equal("precious"))
			}
		})
	}
}

func TestRequestTimeoutAnswersTryAgain(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t, func(o *stackOpts) { o.conf.RequestTimeout = 200 * time.Millisecond })
	gt := newGate()
	defer gt.release()
	s.ipam.set(func(f *fakeIPAM) { f.pending = gt.pending })

	reply, err := s.client.Add(ctx(t), addRequest("c1", "web"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_ERROR))
	g.Expect(reply.GetErrorCode()).To(Equal(cni.CodeTryAgainLater))
	g.Expect(reply.GetError()).To(ContainSubstring("the agent did not answer within 200ms (requestTimeout)"))
	g.Expect(reply.GetInterfaces()).To(BeEmpty(), "an address that is not durable is never handed out")
	g.Expect(s.reg.counter(t, "contiv_podmanager_requests_total", map[string]string{"method": "add", "code": "11"})).To(Equal(1.0))
}

func TestCloseAnswersTheCallsInFlight(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t)
	gt := newGate()
	defer gt.release()
	s.ipam.set(func(f *fakeIPAM) { f.pending = gt.pending })

	type result struct {
		reply *cni.CNIReply
		err   error
	}
	const calls = 3
	results := make(chan result, calls)
	for i := range calls {
		go func() {
			reply, err := s.client.Add(context.Background(), addRequest("c"+string(rune('a'+i)), "pod-"+string(rune('a'+i))))
			results <- result{reply, err}
		}()
	}
	for range calls {
		<-gt.waiting // every call waits for its durable write
	}
	g.Expect(s.stop()).To(Succeed())
	for range calls {
		r := <-results
		g.Expect(r.err).NotTo(HaveOccurred())
		g.Expect(r.reply.GetErrorCode()).To(Equal(cni.CodeTryAgainLater))
		g.Expect(r.reply.GetError()).To(ContainSubstring("shutting down"))
	}
	_, err := os.Lstat(s.socket)
	g.Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue())
}
