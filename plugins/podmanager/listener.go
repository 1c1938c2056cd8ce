package podmanager

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener is the socket's listener as the gRPC server sees it: it
// keeps at most maxConnections connections open, counts them, tells the
// connections that miss gRPC's handshake deadline, and cuts the handshakes
// in progress when it closes.
//
// A slot is taken before Accept, so a connection past the limit is not
// accepted at all: it waits in the kernel's accept backlog (and a client
// dialing into a full backlog gets EAGAIN) until an open one closes.
//
// The handshake is told from gRPC's own bookkeeping: the server bounds it
// (grpc.ConnectionTimeout) with a deadline on the accepted connection,
// set at once and cleared with SetDeadline(time.Time{}) when the HTTP/2
// handshake is over; gRPC sets no other deadline on it. So a read or
// write that fails with os.ErrDeadlineExceeded before that clearing is a
// handshake that timed out (gRPC then closes the connection).
type limitListener struct {
	net.Listener
	metrics *podmanagerMetrics

	slots chan struct{} // one token per open connection
	done  chan struct{} // closed by Close: Accept waits no more

	mu          sync.Mutex
	closed      bool
	handshaking map[*limitedConn]struct{} // accepted, handshake not over
}

var _ net.Listener = (*limitListener)(nil)

// newLimitListener wraps ln; max must be at least 1 (Config.Validate).
func newLimitListener(ln net.Listener, max int, m *podmanagerMetrics) *limitListener {
	return &limitListener{
		Listener: ln, metrics: m,
		slots: make(chan struct{}, max), done: make(chan struct{}),
		handshaking: map[*limitedConn]struct{}{},
	}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
	}
	raw, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	c := &limitedConn{Conn: raw, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed { // Close ran meanwhile: it could not cut this one
		_ = raw.Close()
		<-l.slots
		return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
	}
	l.handshaking[c] = struct{}{}
	l.metrics.connections.Inc()
	return c, nil
}

// Close stops accepting and closes the connections whose handshake is not
// over: gRPC's Stop and GracefulStop wait for those handshakes, which
// would otherwise hold the agent's shutdown for up to handshakeTimeout.
// Connections past their handshake are the gRPC server's to drain or cut.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return err
	}
	l.closed = true
	close(l.done)
	pending := make([]*limitedConn, 0, len(l.handshaking))
	for c := range l.handshaking {
		pending = append(pending, c)
	}
	l.mu.Unlock()
	for _, c := range pending {
		_ = c.Close()
	}
	return err
}

// handshakeOver forgets c as a handshake in progress; false if it was not
// one any more.
func (l *limitListener) handshakeOver(c *limitedConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.handshaking[c]
	delete(l.handshaking, c)
	return ok
}

// limitedConn is an accepted connection; closing it frees its slot.
type limitedConn struct {
	net.Conn
	l         *limitListener
	timedOut  atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Read counts a handshake that timed out.
func (c *limitedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.noteTimeout(err)
	}
	return n, err
}

// Write counts a handshake that timed out.
func (c *limitedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.noteTimeout(err)
	}
	return n, err
}

// SetDeadline with the zero time is gRPC ending the handshake.
func (c *limitedConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.l.handshakeOver(c)
	}
	return c.Conn.SetDeadline(t)
}

// noteTimeout counts err once if it is the handshake's deadline.
func (c *limitedConn) noteTimeout(err error) {
	if !errors.Is(err, os.ErrDeadlineExceeded) || !c.isHandshaking() {
		return
	}
	if c.timedOut.CompareAndSwap(false, true) {
		c.l.metrics.handshakeTimeouts.Inc()
	}
}

func (c *limitedConn) isHandshaking() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	_, ok := c.l.handshaking[c]
	return ok
}

// Close closes the connection and frees its slot, once.
func (c *limitedConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.Conn.Close()
		c.l.handshakeOver(c)
		c.l.metrics.connections.Dec()
		<-c.l.slots
	})
	return c.closeErr
}
