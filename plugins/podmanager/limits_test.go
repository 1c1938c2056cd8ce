package podmanager_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/contiv-ipam/agent/plugins/podmanager"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// Metric names of the socket's bounds.
const (
	openConnections   = "contiv_podmanager_open_connections"
	handshakeTimeouts = "contiv_podmanager_handshake_timeouts_total"
)

// fdSlack is how many descriptors the stack may open or close on its own
// while a test counts them (etcd's and the controller's connections, the
// gRPC client's, the count itself).
const fdSlack = 32

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting open file descriptors: %v", err)
	}
	return len(entries)
}

// dialSilent opens up to n connections to the socket that never write a
// byte; they are closed at the end of the test. A full accept backlog
// (EAGAIN) ends the dialing early: what was dialed is returned.
func dialSilent(t *testing.T, path string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range n {
		c, err := net.Dial("unix", path)
		if errors.Is(err, syscall.EAGAIN) {
			t.Logf("the accept backlog is full after %d connections", len(conns))
			break
		}
		if err != nil {
			t.Fatalf("dialing %s: %v", path, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// newClient is a CNI client on a gRPC connection of its own.
func newClient(t *testing.T, path string) cni.RemoteCNIClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return cni.NewRemoteCNIClient(conn)
}

// TestIdleConnectionFloodIsBounded: thousands of connections that never
// write a byte hold at most maxConnections of the agent's descriptors,
// and the client already connected keeps being served meanwhile.
func TestIdleConnectionFloodIsBounded(t *testing.T) {
	g := NewWithT(t)
	const maxConns, flood = 16, 3000
	s := startStack(t, func(o *stackOpts) {
		o.conf.MaxConnections = maxConns
		o.conf.HandshakeTimeout = 2 * time.Second // the flood stays while the test counts
	})
	reply, err := s.client.Status(ctx(t), &cni.StatusRequest{}) // connects before the flood
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	g.Expect(s.reg.gauge(t, openConnections)).To(Equal(1.0))
	before := openFDs(t)

	start := time.Now()
	conns := dialSilent(t, s.socket, flood)
	t.Logf("dialed %d silent connections in %s", len(conns), time.Since(start))
	g.Expect(len(conns)).To(BeNumerically(">", 10*maxConns), "the flood must exceed maxConnections by far")
	g.Eventually(func() float64 { return s.reg.gauge(t, openConnections) }).Should(Equal(float64(maxConns)),
		"the agent accepts until maxConnections are open")
	agentFDs := openFDs(t) - before - len(conns) // the test's own ends are in this process too
	t.Logf("descriptors: %d before, %d silent client ends, %d more on the agent's side (maxConnections %d)",
		before, len(conns), agentFDs, maxConns)
	g.Expect(agentFDs).To(BeNumerically("<=", maxConns+fdSlack))

	const adds = 20
	var slowest time.Duration
	for i := range adds {
		c := "flood-" + string(rune('a'+i))
		callCtx, cancel := context.WithTimeout(ctx(t), podmanager.DefaultConfig().RequestTimeout)
		began := time.Now()
		reply, err := s.client.Add(callCtx, addRequest(c, "pod-"+c))
		slowest = max(slowest, time.Since(began))
		cancel()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	}
	t.Logf("%d ADDs during the flood, the slowest in %s", adds, slowest)
	g.Expect(s.reg.gauge(t, openConnections)).To(BeNumerically("<=", maxConns))
	g.Expect(openFDs(t) - before - len(conns)).To(BeNumerically("<=", maxConns+fdSlack))
}

// TestANewClientIsServedWhileTheFloodDrains: a client that dials behind
// thousands of silent connections waits in the accept backlog while the
// handshake timeout closes them maxConnections at a time, and is served
// within the request timeout; the agent never holds more than
// maxConnections meanwhile.
func TestANewClientIsServedWhileTheFloodDrains(t *testing.T) {
	g := NewWithT(t)
	const maxConns, flood, handshake = 128, 3000, 50 * time.Millisecond
	s := startStack(t, func(o *stackOpts) {
		o.conf.MaxConnections = maxConns
		o.conf.HandshakeTimeout = handshake
	})
	before := openFDs(t)
	var peakFDs, peakOpen atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // samples until stop
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			peakFDs.Store(max(peakFDs.Load(), int64(openFDs(t))))
			peakOpen.Store(max(peakOpen.Load(), int64(s.reg.gauge(t, openConnections))))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	conns := dialSilent(t, s.socket, flood)
	g.Expect(len(conns)).To(BeNumerically(">", 10*maxConns))
	start := time.Now()
	callCtx, cancel := context.WithTimeout(ctx(t), podmanager.DefaultConfig().RequestTimeout)
	defer cancel()
	reply, err := newClient(t, s.socket).Add(callCtx, addRequest("late", "late"))
	took := time.Since(start)
	close(stop)
	<-sampled
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
	timedOut := s.reg.counter(t, handshakeTimeouts, nil)
	t.Logf("an ADD behind %d silent connections answered in %s; %v handshakes timed out meanwhile; peak %d open (maxConnections %d), peak %d descriptors over %d before and %d client ends",
		len(conns), took, timedOut, peakOpen.Load(), maxConns, peakFDs.Load()-int64(before)-int64(len(conns)), before, len(conns))
	g.Expect(timedOut).To(BeNumerically(">=", len(conns)-maxConns), "the silent connections ahead were closed by the handshake timeout")
	g.Expect(peakOpen.Load()).To(BeNumerically("<=", maxConns))
	g.Expect(peakFDs.Load() - int64(before) - int64(len(conns))).To(BeNumerically("<=", maxConns+fdSlack))
}

// TestHandshakeTimeoutClosesASilentConnection: a connection that does not
// complete the HTTP/2 handshake is closed once handshakeTimeout has
// passed; one that completed it is not.
func TestHandshakeTimeoutClosesASilentConnection(t *testing.T) {
	g := NewWithT(t)
	const handshake = 200 * time.Millisecond
	s := startStack(t, func(o *stackOpts) { o.conf.HandshakeTimeout = handshake })
	reply, err := s.client.Status(ctx(t), &cni.StatusRequest{}) // completes its handshake
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())

	start := time.Now()
	silent := dialSilent(t, s.socket, 1)[0]
	g.Expect(silent.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
	got, err := io.ReadAll(silent) // the server's SETTINGS frame, then EOF
	took := time.Since(start)
	t.Logf("the silent connection was closed after %s (handshakeTimeout %s)", took, handshake)
	g.Expect(err).NotTo(HaveOccurred(), "the server closed the connection (EOF) before our own deadline")
	g.Expect(got).NotTo(BeEmpty(), "the gRPC server spoke first (HTTP/2 SETTINGS)")
	g.Expect(took).To(BeNumerically(">=", handshake))
	g.Eventually(func() float64 { return s.reg.counter(t, handshakeTimeouts, nil) }).Should(Equal(1.0))
	g.Eventually(func() float64 { return s.reg.gauge(t, openConnections) }).Should(Equal(1.0),
		"the client that completed its handshake earlier is still connected")
	g.Expect(s.reg.counter(t, handshakeTimeouts, nil)).To(Equal(1.0))
}

// TestCloseCutsHandshakesInProgress: Close does not wait for the
// handshake deadline of a silent connection (gRPC's stop waits for the
// handshakes in progress).
func TestCloseCutsHandshakesInProgress(t *testing.T) {
	g := NewWithT(t)
	s := startStack(t, func(o *stackOpts) { o.conf.HandshakeTimeout = time.Minute })
	silent := dialSilent(t, s.socket, 1)[0]
	g.Eventually(func() float64 { return s.reg.gauge(t, openConnections) }).Should(Equal(1.0))

	start := time.Now()
	g.Expect(s.stop()).To(Succeed())
	took := time.Since(start)
	t.Logf("Close took %s with a handshake in progress (handshakeTimeout 1m)", took)
	g.Expect(took).To(BeNumerically("<", 2*time.Second), "Close waited for the handshake deadline")
	g.Expect(silent.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
	_, err := io.ReadAll(silent)
	g.Expect(err).NotTo(HaveOccurred(), "the server closed the connection (EOF)")
	g.Expect(s.reg.gauge(t, openConnections)).To(BeZero())
	g.Expect(s.reg.counter(t, handshakeTimeouts, nil)).To(BeZero(), "a cut at Close is no handshake timeout")
}

// TestIdleTimeoutClosesAnIdleConnection: a connection with no call for
// idleTimeout is closed; one whose call lasts longer is not.
func TestIdleTimeoutClosesAnIdleConnection(t *testing.T) {
	g := NewWithT(t)
	const idle = 200 * time.Millisecond
	s := startStack(t, func(o *stackOpts) { o.conf.IdleTimeout = idle })

	gt := newGate()
	defer gt.release()
	s.ipam.set(func(f *fakeIPAM) { f.pending = gt.pending })
	replies := make(chan *cni.CNIReply, 1)
	go func() {
		reply, _ := s.client.Add(context.Background(), addRequest("c1", "web"))
		replies <- reply
	}()
	<-gt.waiting
	g.Consistently(func() float64 { return s.reg.gauge(t, openConnections) }, 3*idle).Should(Equal(1.0),
		"a connection with a call in flight is not idle")
	gt.release()
	var reply *cni.CNIReply
	g.Eventually(replies).Should(Receive(&reply))
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())

	g.Eventually(func() float64 { return s.reg.gauge(t, openConnections) }, 10*time.Second).Should(BeZero(),
		"the idle connection is closed")
	reply, err := s.client.Status(ctx(t), &cni.StatusRequest{}) // the client dials anew
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reply.GetResult()).To(Equal(cni.CNIReply_OK), reply.GetError())
}
