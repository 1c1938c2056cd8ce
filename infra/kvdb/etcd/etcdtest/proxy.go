package etcdtest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a server: a client that
// dials Addr() reaches the server through it, and the test can stall what
// the clients send (a congested or broken link: requests sent but not
// delivered, their replies never coming). Stopped by t.Cleanup.
type Proxy struct {
	tb     testing.TB
	target string
	ln     net.Listener

	mu      sync.Mutex
	stalled chan struct{} // non-nil while stalled; closed by Release
	conns   []net.Conn
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards every connection
// to target ("host:port").
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{tb: tb, target: target, ln: ln}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stall holds every byte the clients send from now on until Release: the
// bytes stay in the proxy (and the sockets' buffers), in order, and are
// delivered when released. Replies flow on.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Release delivers what Stall held and lets traffic flow again.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// gate returns a channel to wait on before forwarding, nil when open.
func (p *Proxy) gate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, true)
		go p.pipe(c, s, false)
	}
}

// pipe copies from src to dst; the client's direction waits at the gate.
func (p *Proxy) pipe(dst, src net.Conn, fromClient bool) {
	defer p.wg.Done()
	defer func() { _ = dst.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && fromClient {
			if g := p.gate(); g != nil {
				<-g
			}
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				p.tb.Logf("proxy: %v", err)
			}
			return
		}
	}
}

func (p *Proxy) close() {
	p.Release()
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
