package podmanager

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value reads a gauge or a counter.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Gauge != nil {
		return d.GetGauge().GetValue()
	}
	return d.GetCounter().GetValue()
}

// limitFixture is a limitListener on a unix socket in a temp dir.
type limitFixture struct {
	l       *limitListener
	path    string
	metrics *podmanagerMetrics
}

func newLimitFixture(t *testing.T, max int) *limitFixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	m := newPodmanagerMetrics()
	l := newLimitListener(ln, max, m)
	t.Cleanup(func() { _ = l.Close() })
	return &limitFixture{l: l, path: path, metrics: m}
}

// dial opens a client connection, closed at the end of the test.
func (f *limitFixture) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type accepted struct {
	c   net.Conn
	err error
}

// acceptAsync runs one Accept in a goroutine.
func (f *limitFixture) acceptAsync() <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		c, err := f.l.Accept()
		ch <- accepted{c, err}
	}()
	return ch
}

func TestLimitListenerWaitsForAFreeSlot(t *testing.T) {
	g := NewWithT(t)
	f := newLimitFixture(t, 2)
	for range 3 {
		f.dial(t)
	}
	first, err := f.l.Accept()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.l.Accept()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(value(t, f.metrics.connections)).To(Equal(2.0))

	third := f.acceptAsync()
	g.Consistently(third, 100*time.Millisecond).ShouldNot(Receive(), "the third waits in the backlog")
	g.Expect(first.Close()).To(Succeed())
	g.Expect(first.Close()).To(Succeed(), "a second Close is harmless")
	var got accepted
	g.Eventually(third).Should(Receive(&got))
	g.Expect(got.err).NotTo(HaveOccurred())
	g.Expect(value(t, f.metrics.connections)).To(Equal(2.0))

	// The double Close freed one slot, not two.
	f.dial(t)
	fourth := f.acceptAsync()
	g.Consistently(fourth, 100*time.Millisecond).ShouldNot(Receive())
	g.Expect(got.c.Close()).To(Succeed())
	g.Eventually(fourth).Should(Receive())
}

func TestLimitListenerCloseCutsOnlyHandshakes(t *testing.T) {
	g := NewWithT(t)
	f := newLimitFixture(t, 2)
	inHandshake, served := f.dial(t), f.dial(t)
	a, err := f.l.Accept()
	g.Expect(err).NotTo(HaveOccurred())
	b, err := f.l.Accept()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.SetDeadline(time.Time{})).To(Succeed()) // gRPC: b's handshake is over
	waiting := f.acceptAsync()                         // no slot left

	g.Expect(f.l.Close()).To(Succeed())
	var got accepted
	g.Eventually(waiting).Should(Receive(&got))
	g.Expect(got.err).To(MatchError(net.ErrClosed))

	g.Expect(inHandshake.SetReadDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	_, err = io.ReadAll(inHandshake)
	g.Expect(err).NotTo(HaveOccurred(), "a handshake in progress is cut (EOF)")
	_, err = b.Write([]byte("x"))
	g.Expect(err).NotTo(HaveOccurred(), "a served connection stays open")
	buf := make([]byte, 1)
	_, err = io.ReadFull(served, buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(value(t, f.metrics.connections)).To(Equal(1.0))
	g.Expect(a.Close()).To(Succeed())
	g.Expect(value(t, f.metrics.connections)).To(Equal(1.0), "a's Close at Close counted already")
	g.Expect(value(t, f.metrics.handshakeTimeouts)).To(BeZero())
}

func TestLimitListenerCountsHandshakeTimeoutsOnce(t *testing.T) {
	g := NewWithT(t)
	f := newLimitFixture(t, 2)
	f.dial(t)
	f.dial(t)
	slow, err := f.l.Accept()
	g.Expect(err).NotTo(HaveOccurred())
	done, err := f.l.Accept()
	g.Expect(err).NotTo(HaveOccurred())

	// As gRPC's handshake: a deadline at accept, cleared when it is over.
	g.Expect(slow.SetDeadline(time.Now().Add(10 * time.Millisecond))).To(Succeed())
	buf := make([]byte, 1)
	for range 2 {
		_, err = slow.Read(buf)
		g.Expect(errors.Is(err, os.ErrDeadlineExceeded)).To(BeTrue(), "%v", err)
	}
	g.Expect(value(t, f.metrics.handshakeTimeouts)).To(Equal(1.0), "one connection, counted once")

	g.Expect(done.SetDeadline(time.Time{})).To(Succeed())
	g.Expect(done.SetReadDeadline(time.Now().Add(time.Millisecond))).To(Succeed())
	_, err = done.Read(buf)
	g.Expect(errors.Is(err, os.ErrDeadlineExceeded)).To(BeTrue(), "%v", err)
	g.Expect(value(t, f.metrics.handshakeTimeouts)).To(Equal(1.0), "a deadline after the handshake is not counted")
}
