//go:build node

package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testNetNS makes a network namespace of the test's own with lo up and
// removes it at cleanup; it returns its path.
func testNetNS(t *testing.T) string {
	t.Helper()
	id, err := randomID()
	if err != nil {
		t.Fatal(err)
	}
	name := "contiv-bridge-" + id
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s (run as root)", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	path := filepath.Join("/run/netns", name)
	if out, err := exec.Command("nsenter", "--net="+path, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up in %s: %v: %s", name, err, out)
	}
	return path
}

// echoServer answers every line with "<tag> <line>" until the client
// half-closes, on ln; it stops at cleanup.
func echoServer(t *testing.T, ln net.Listener, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = c.Close() }()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := fmt.Fprintf(c, "%s %s\n", tag, sc.Text()); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// roundTrip sends two lines over c, half-closes it and returns all it
// reads until the far side closes.
func roundTrip(c net.Conn) (string, error) {
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, "one\ntwo\n"); err != nil {
		return "", err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	out, err := io.ReadAll(c)
	return string(out), err
}

// netnsOfThreads maps each thread of this process to its network
// namespace.
func netnsOfThreads(t *testing.T) map[string]string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, task := range tasks {
		if ns, err := os.Readlink(filepath.Join("/proc/self/task", task.Name(), "ns", "net")); err == nil {
			out[task.Name()] = ns
		}
	}
	return out
}

// A Bridge carries connections out of a namespace (a server on its
// loopback, which the machine's loopback does not reach, answers on the
// machine's) and into one (a server on the machine's loopback answers on
// the namespace's), both ways, with half-closes passed on; many switches
// into the namespace leave every thread of the process in the machine's
// namespace; Close ends the open connections and the listener.
func TestBridge(t *testing.T) {
	g := NewWithT(t)
	ns := testNetNS(t)
	own, err := os.Readlink("/proc/self/ns/net")
	g.Expect(err).NotTo(HaveOccurred())

	inside, err := ListenIn(ns, "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	echoServer(t, inside, "inside")
	_, err = net.DialTimeout("tcp", inside.Addr().String(), time.Second)
	g.Expect(err).To(HaveOccurred(), "the namespace's loopback is not the machine's")

	out, err := NewBridge(Endpoint{"", "127.0.0.1:0"}, Endpoint{ns, inside.Addr().String()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(out.Close()).To(Succeed()) }()
	c, err := net.Dial("tcp", out.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(roundTrip(c)).To(Equal("inside one\ninside two\n"))

	machine, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	echoServer(t, machine, "machine")
	// The same address inside: the machine's server answers there.
	in, err := NewBridge(Endpoint{ns, machine.Addr().String()}, Endpoint{"", machine.Addr().String()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(in.Close()).To(Succeed()) }()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := DialIn(context.Background(), ns, in.Addr())
			if err != nil {
				errs <- err
				return
			}
			got, err := roundTrip(c)
			if err == nil && got != "machine one\nmachine two\n" {
				err = fmt.Errorf("got %q", got)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	for task, ns := range netnsOfThreads(t) {
		g.Expect(ns).To(Equal(own), "thread %s", task)
	}

	// Close ends an open connection and stops listening.
	open, err := net.Dial("tcp", out.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.WriteString(open, "x\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bufio.NewReader(open).ReadString('\n')).To(Equal("inside x\n"))
	g.Expect(out.Close()).To(Succeed())
	g.Expect(open.SetReadDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	_, err = io.ReadAll(open)
	g.Expect(err).NotTo(HaveOccurred(), "EOF, not a timeout: the bridge closed its side")
	_ = open.Close()
	_, err = net.DialTimeout("tcp", out.Addr(), time.Second)
	g.Expect(err).To(HaveOccurred())
	_, err = ListenIn("/run/netns/contiv-bridge-none", "127.0.0.1:0")
	g.Expect(err).To(MatchError(ContainSubstring("contiv-bridge-none")))
}
