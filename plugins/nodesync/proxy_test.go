package nodesync_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards loopback TCP connections to an etcd server, so that one
// agent can be cut off from etcd while the others still reach it.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy listens on 127.0.0.1 and forwards to target until cleanup.
func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the address to give the agent as its etcd endpoint.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every forwarded connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore forwards new connections again.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in, out) {
			continue
		}
		p.wg.Go(func() { pipe(in, out) })
		p.wg.Go(func() { pipe(out, in) })
	}
}

// track records a forwarded pair; while cut it closes them instead.
func (p *proxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = in.Close()
		_ = out.Close()
		return false
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	return true
}

// pipe copies until either side closes, then closes both.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}
