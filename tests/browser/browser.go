// Package browser loads pages in a headless Debian chromium for tests:
// DumpDOM returns the DOM after load, Screenshot writes a PNG.
//
// # The network rule
//
// Tests talk only to loopback and to namespaces they created. chromium
// makes requests of its own (component updates, safe browsing, DNS
// prefetch), so each call runs it in a network namespace of its own,
// created by the harness, with only lo up: nothing it sends can leave the
// machine, nor reach the host's loopback. The page under test listens on
// the host's loopback; the harness bridges it: a TCP listener on
// 127.0.0.1 inside the namespace whose connections are proxied to the
// host-side address of the URL (which must be a loopback address), and
// chromium is given the URL with that in-namespace address (path and
// query kept).
//
// # Owners
//
//   - Each call (DumpDOM, Screenshot) owns its namespace, listener, proxy
//     goroutines and chromium process, and ends them all before it
//     returns: the namespace has no name (no bind mount under
//     /var/run/netns), it lives while the listener's socket and
//     chromium's processes hold it, and it is gone once they are closed
//     and killed. t.Cleanup removes the profile directory (t.TempDir).
//   - The namespace is made on a goroutine locked to its OS thread that
//     unshares the thread's network namespace, brings lo up, listens and
//     starts chromium, then sets the thread back into the test's
//     namespace and only then unlocks it, so no other goroutine ever runs
//     in the namespace. (Ending the goroutine locked would not do: Go
//     never ends the main thread, and a namespace left on it is the whole
//     process's as /proc/self sees it; a CI run met that.) Every process
//     left in the namespace after chromium exits is killed (reap): a
//     helper of chromium may leave its process group.
//
// # Caller duties
//
//  1. Run as root (unshare needs CAP_SYS_ADMIN) with /usr/bin/chromium
//     installed (`make browser-deps`; `make test-deps` includes it).
//     Call Require(t) first: it fails the test naming what is missing
//     (it skips, loudly, only when the test runs unprivileged on a
//     machine without chromium, as a developer's laptop may).
//  2. Serve the page on the host's loopback (127.0.0.1 or ::1) and pass
//     its URL.
//  3. A page that loads longer than the virtual time budget (5 s) is cut
//     there; a chromium that does not exit within 60 s fails the test.
package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Chromium is the browser the harness runs (Debian's package).
const Chromium = "/usr/bin/chromium"

// Timeout bounds one chromium run, its first start included.
const Timeout = 60 * time.Second

// timeout is Timeout but for the harness's own test of a hung page.
var timeout = Timeout

// virtualTimeBudget is how long (ms of virtual time) chromium lets a page
// load before it dumps or shoots.
const virtualTimeBudget = 5000

// Available returns nil when chromium can run here, else why.
func Available() error {
	if _, err := os.Stat(Chromium); err != nil {
		return fmt.Errorf("%s is missing (run `make browser-deps`, or apt-get install chromium): %w", Chromium, err)
	}
	if os.Geteuid() != 0 {
		return errors.New("the browser harness runs chromium in a network namespace of its own, which needs root")
	}
	return nil
}

// Require fails t when chromium cannot run here, saying why. It skips
// only when the test is not root and chromium is absent (a developer's
// machine), and says so loudly; `make test` installs chromium and runs
// as root, so there it never skips.
func Require(t testing.TB) {
	t.Helper()
	err := Available()
	if err == nil {
		return
	}
	_, statErr := os.Stat(Chromium)
	if os.Geteuid() != 0 && statErr != nil {
		t.Log("!!!!!!!! BROWSER TEST SKIPPED: not root and no " + Chromium + " !!!!!!!!")
		t.Skipf("SKIPPED, NOT PASSED: %v; run as root after `make browser-deps`", err)
	}
	t.Fatalf("the browser harness cannot run: %v", err)
}

// DumpDOM loads url in headless chromium and returns the serialized DOM
// after load (--dump-dom).
func DumpDOM(t testing.TB, url string) string {
	t.Helper()
	out := run(t, url, "--dump-dom")
	if !strings.Contains(out, "<html") {
		t.Fatalf("chromium dumped no DOM for %s: %q", url, out)
	}
	return out
}

// Screenshot loads url and writes a PNG of width x height to file
// (--screenshot, --window-size).
func Screenshot(t testing.TB, url, file string, width, height int) {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(abs)
	run(t, url, "--screenshot="+abs, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height),
		"--hide-scrollbars")
	if st, err := os.Stat(abs); err != nil || st.Size() == 0 {
		t.Fatalf("chromium wrote no screenshot of %s to %s: %v", url, abs, err)
	}
}

// run loads target in chromium inside a fresh network namespace and
// returns its stdout; everything it started is gone when it returns.
func run(t testing.TB, target string, mode ...string) string {
	t.Helper()
	Require(t)
	u, host, err := loopbackURL(target)
	if err != nil {
		t.Fatal(err)
	}
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	var stdout, stderr bytes.Buffer
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--disable-sync", "--disable-default-apps",
		"--disable-extensions", "--no-default-browser-check", "--disable-dev-shm-usage", "--disable-breakpad", "--disable-crash-reporter",
		"--user-data-dir=" + profile, "--virtual-time-budget=" + strconv.Itoa(virtualTimeBudget)}, mode...)
	ns, err := startInNamespace(func(inNS string) *exec.Cmd {
		nu := *u
		nu.Host = inNS
		cmd := exec.Command(Chromium, append(args, nu.String())...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd
	})
	if err != nil {
		t.Fatalf("starting chromium in a network namespace: %v", err)
	}
	proxyDone := ns.proxy(host)
	waitErr := ns.wait(ctx)
	ns.close()
	<-proxyDone
	noteRun(ns.inode, ns.cmd.Process.Pid, profile)
	if waitErr != nil {
		t.Fatalf("chromium on %s: %v\nstderr:\n%s", target, waitErr, tail(stderr.String(), 30))
	}
	return stdout.String()
}

// loopbackURL parses target and checks that it is http(s) on a loopback
// address; host is its host:port.
func loopbackURL(target string) (*url.URL, string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, "", fmt.Errorf("URL %q: %w", target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", fmt.Errorf("URL %q: want http or https", target)
	}
	h := u.Hostname()
	ip := net.ParseIP(h)
	if h == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	}
	if ip == nil || !ip.IsLoopback() {
		return nil, "", fmt.Errorf("URL %q: the page must listen on the host's loopback (the network rule), not on %q", target, h)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u, net.JoinHostPort(ip.String(), port), nil
}

// namespace is one chromium run's network namespace: the listener inside
// it, the process in it, and the namespace's inode (for the leak checks).
type namespace struct {
	ln    net.Listener
	cmd   *exec.Cmd
	inode uint64
	done  chan error // the process's exit

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// startInNamespace unshares a network namespace on a locked thread,
// brings lo up, listens on 127.0.0.1:0 in it, starts the command build
// returns for the listener's address (forked from that thread, so in the
// namespace), then puts the thread back into the test's namespace and
// unlocks it (startOnThisThread). The namespace lives on in the
// listener's socket and the process. A thread must go back: a goroutine
// that ends locked ends its thread, except the main thread, which Go
// never ends, and whose namespace /proc/self names for the whole process.
func startInNamespace(build func(inNS string) *exec.Cmd) (*namespace, error) {
	type result struct {
		ns  *namespace
		err error
	}
	res := make(chan result, 1)
	go func() {
		ns, err := startOnThisThread(build)
		res <- result{ns, err}
	}()
	r := <-res
	if r.err != nil {
		return nil, r.err
	}
	go func() { r.ns.done <- r.ns.cmd.Wait() }()
	return r.ns, nil
}

// startOnThisThread runs enterAndStart on the locked calling thread and
// restores the thread's network namespace; only a restored thread is
// unlocked.
func startOnThisThread(build func(inNS string) *exec.Cmd) (*namespace, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("the thread's network namespace: %w", err)
	}
	defer func() { _ = orig.Close() }()
	ns, err := enterAndStart(build)
	if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
		// the thread stays in the test's namespace: it ends with its
		// goroutine (locked, never unlocked)
		if err == nil {
			err = fmt.Errorf("back to the test's network namespace: %w", rerr)
			_ = syscall.Kill(-ns.cmd.Process.Pid, syscall.SIGKILL)
			_ = ns.ln.Close()
		}
		return nil, err
	}
	runtime.UnlockOSThread()
	return ns, err
}

// enterAndStart unshares the calling (locked) thread's network
// namespace, brings lo up, listens on 127.0.0.1:0 and starts the command
// build returns for that address.
func enterAndStart(build func(inNS string) *exec.Cmd) (*namespace, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("stat of the new namespace: %w", err)
	}
	if err := loUp(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening in the namespace: %w", err)
	}
	ns := &namespace{ln: ln, inode: st.Ino, done: make(chan error, 1)}
	ns.cmd = build(ln.Addr().String())
	if err := ns.cmd.Start(); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ns, nil
}

// loUp sets IFF_UP on lo in the calling thread's network namespace.
func loUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for lo: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("flags of lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}

// proxy accepts connections in the namespace and copies each to a new
// connection to host (dialled from the host's namespace); the channel is
// closed once the listener is closed and every copy ended.
func (ns *namespace) proxy(host string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			in, err := ns.ln.Accept()
			if err != nil {
				return
			}
			if !ns.track(in) {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ns.pipe(in, host)
			}()
		}
	}()
	return done
}

// track remembers c for close; false when the namespace is closed.
func (ns *namespace) track(c net.Conn) bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.closed {
		_ = c.Close()
		return false
	}
	ns.conns = append(ns.conns, c)
	return true
}

func (ns *namespace) pipe(in net.Conn, host string) {
	out, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		_ = in.Close()
		return
	}
	if !ns.track(out) {
		_ = in.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go cp(out, in)
	go cp(in, out)
	wg.Wait()
	_ = in.Close()
	_ = out.Close()
}

// wait waits for chromium to exit, killing its process group when ctx
// ends first (and always, for helpers it may leave behind).
func (ns *namespace) wait(ctx context.Context) error {
	var err error
	select {
	case err = <-ns.done:
		if err != nil {
			err = fmt.Errorf("chromium failed: %w", err)
		}
	case <-ctx.Done():
		err = fmt.Errorf("chromium did not finish within %s: %w", timeout, ctx.Err())
		_ = syscall.Kill(-ns.cmd.Process.Pid, syscall.SIGKILL)
		<-ns.done
	}
	_ = syscall.Kill(-ns.cmd.Process.Pid, syscall.SIGKILL) // its group's leftovers, if any
	if left := ns.reap(5 * time.Second); len(left) > 0 && err == nil {
		err = fmt.Errorf("processes of chromium's namespace outlived SIGKILL for 5s: %v", left)
	}
	return err
}

// reap kills every process left in the namespace (a helper of chromium
// that left its process group: a crash handler starts a session of its
// own) until none is left or d has passed; it returns the PIDs still
// there then.
func (ns *namespace) reap(d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		left := inNamespace(ns.inode)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inNamespace lists the processes (not this one) whose network namespace
// has inode ino; a zombie has none and is not listed.
func inNamespace(ino uint64) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(dir+"/ns/net", &st) == nil && st.Ino == ino {
			out = append(out, pid)
		}
	}
	return out
}

// close closes the listener and every proxied connection: with the
// processes gone, nothing holds the namespace any more.
func (ns *namespace) close() {
	ns.mu.Lock()
	conns := ns.conns
	ns.conns, ns.closed = nil, true
	ns.mu.Unlock()
	_ = ns.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
}

// tail is the last n lines of s but chromium's complaints about D-Bus
// (there is none in a test's namespace).
func tail(s string, n int) string {
	var lines []string
	for l := range strings.SplitSeq(strings.TrimRight(s, "\n"), "\n") {
		if !strings.Contains(l, "dbus/") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lastRun is what the leak tests look for after a run: its namespace's
// inode, chromium's PID and its profile directory.
var (
	lastMu  sync.Mutex
	lastRun struct {
		inode   uint64
		pid     int
		profile string
	}
)

func noteRun(inode uint64, pid int, profile string) {
	lastMu.Lock()
	defer lastMu.Unlock()
	lastRun.inode, lastRun.pid, lastRun.profile = inode, pid, profile
}
