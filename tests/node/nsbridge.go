//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A Bridge carries TCP connections across a network namespace boundary:
// it listens on an address of one namespace and, for every connection it
// accepts, dials an address of another and copies both ways. It is how
// the tests keep to loopback and to namespaces of their own while the
// node's host network is a namespace the machine's loopback cannot see:
// the API server's address answers inside the node's namespace, and the
// agent's REST API (127.0.0.1:9999 there) on the machine's loopback.
//
// The namespace switch: a socket belongs to the network namespace of the
// thread that creates it, for its whole life. ListenIn and DialIn create
// theirs on a goroutine locked to its thread, switched into the
// namespace with setns(2) and back before the thread is unlocked; a
// thread that cannot be switched back stays locked, and the runtime ends
// it with its goroutine, so no other goroutine ever runs in the wrong
// namespace. Accept, read and write then work from any thread.
//
// Owner: a Bridge's accept loop and its copying goroutines are its own;
// Close stops them all and waits for them.
type Bridge struct {
	ln   net.Listener
	to   Endpoint
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{} // the connections of both sides; nil once closed
}

// Endpoint is a TCP address in a network namespace: NetNS is the path of
// the namespace (/run/netns/<name>), "" for this process's own (the
// machine's).
type Endpoint struct {
	NetNS string
	Addr  string
}

func (e Endpoint) String() string {
	if e.NetNS == "" {
		return e.Addr
	}
	return e.Addr + " in " + e.NetNS
}

// bridgeDialTimeout bounds the dial of each connection's far side.
const bridgeDialTimeout = 5 * time.Second

// NewBridge listens on from (port 0: the kernel's choice, see Addr) and
// forwards every connection to to.
func NewBridge(from, to Endpoint) (*Bridge, error) {
	ln, err := ListenIn(from.NetNS, from.Addr)
	if err != nil {
		return nil, err
	}
	b := &Bridge{ln: ln, to: to, open: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

// Addr is the address the bridge listens on (in its namespace).
func (b *Bridge) Addr() string { return b.ln.Addr().String() }

// Close stops accepting, closes every open connection and waits for the
// goroutines; it may be called again.
func (b *Bridge) Close() error {
	err := b.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	b.mu.Lock()
	for c := range b.open {
		_ = c.Close()
	}
	b.open = nil
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

// track adds c to the open connections; false once the bridge is closed.
func (b *Bridge) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		return false
	}
	b.open[c] = struct{}{}
	return true
}

// untrack closes c and forgets it.
func (b *Bridge) untrack(c net.Conn) {
	_ = c.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open != nil {
		delete(b.open, c)
	}
}

// serve accepts until the listener is closed.
func (b *Bridge) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		if !b.track(c) {
			_ = c.Close()
			return
		}
		b.wg.Add(1)
		go b.forward(c)
	}
}

// forward dials the far side for c and copies both ways until both
// directions end (each half-closes the other side's write direction).
func (b *Bridge) forward(c net.Conn) {
	defer b.wg.Done()
	defer b.untrack(c)
	ctx, cancel := context.WithTimeout(context.Background(), bridgeDialTimeout)
	far, err := DialIn(ctx, b.to.NetNS, b.to.Addr)
	cancel()
	if err != nil {
		return
	}
	if !b.track(far) {
		_ = far.Close()
		return
	}
	defer b.untrack(far)
	var copies sync.WaitGroup
	copies.Add(2)
	go pipe(&copies, far, c)
	go pipe(&copies, c, far)
	copies.Wait()
}

// pipe copies src to dst, then half-closes dst (or closes it).
func pipe(wg *sync.WaitGroup, dst, src net.Conn) {
	defer wg.Done()
	_, _ = io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = dst.Close()
}

// ListenIn listens on the TCP address addr inside the network namespace
// netns ("": this process's).
func ListenIn(netns, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetNS(netns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", Endpoint{netns, addr}, err)
	}
	return ln, nil
}

// DialIn dials the TCP address addr from inside the network namespace
// netns ("": this process's).
func DialIn(ctx context.Context, netns, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetNS(netns, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", Endpoint{netns, addr}, err)
	}
	return c, nil
}

// inNetNS runs fn on a thread switched into the network namespace netns
// (fn runs on this goroutine's thread when netns is "").
func inNetNS(netns string, fn func() error) error {
	if netns == "" {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Unlocked only once back in the namespace it started in.
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer func() { _ = own.Close() }()
		target, err := os.Open(netns)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("setns %s: %w", netns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked: it ends with this goroutine.
			done <- errors.Join(ferr, fmt.Errorf("setns back from %s: %w", netns, err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}
