package main

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestUnreachableAgentFailsFast: when nothing can answer at the socket
// (no socket file, or a stale one nobody listens on), every command
// fails with code 11 naming the socket, long before grpcTimeout (10m
// here: a run that waited for it would hit exec's one-minute cut-off and
// fail the test).
func TestUnreachableAgentFailsFast(t *testing.T) {
	missing := func(t *testing.T) string { return filepath.Join(shortDir(t), "absent.sock") }
	stale := func(t *testing.T) string {
		sock := filepath.Join(shortDir(t), "stale.sock")
		lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		lis.SetUnlinkOnClose(false)
		if err := lis.Close(); err != nil {
			t.Fatal(err)
		}
		return sock
	}
	sockets := map[string]func(*testing.T) string{"missing socket": missing, "stale socket": stale}
	for name, mk := range sockets {
		for _, cmd := range []string{"ADD", "DEL", "CHECK", "GC", "STATUS"} {
			t.Run(name+"/"+cmd, func(t *testing.T) {
				g := NewWithT(t)
				sock := mk(t)
				e := run{Command: cmd, Conf: pluginConf("1.1.0", sock, `,"grpcTimeout":"10m"`)}.mustFail(t)
				g.Expect(e.Code).To(BeEquivalentTo(11), "msg %q", e.Msg)
				g.Expect(e.Msg).To(ContainSubstring(sock))
				g.Expect(e.Msg).To(ContainSubstring("try again later"))
				g.Expect(e.Msg).To(ContainSubstring("Unavailable"))
			})
		}
	}
}

// TestSilentAgentTimesOut: an agent that accepts the connection but never
// answers (a listener that never accepts; a server whose handler hangs)
// gets code 11 once grpcTimeout has passed, not before.
func TestSilentAgentTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	conf := func(sock string) string { return pluginConf("1.1.0", sock, `,"grpcTimeout":"300ms"`) }
	t.Run("listener that never accepts", func(t *testing.T) {
		g := NewWithT(t)
		sock := filepath.Join(shortDir(t), "deaf.sock")
		lis, err := net.Listen("unix", sock)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = lis.Close() })
		o := run{Command: "ADD", Conf: conf(sock)}.exec(t)
		g.Expect(o.ExitErr).To(BeTrue())
		e, err := o.Error()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.Code).To(BeEquivalentTo(11), "msg %q", e.Msg)
		g.Expect(e.Msg).To(ContainSubstring(sock))
		g.Expect(e.Msg).To(ContainSubstring("DeadlineExceeded"))
		g.Expect(o.Elapsed).To(BeNumerically(">=", timeout))
	})
	for _, cmd := range []string{"ADD", "DEL", "CHECK", "GC", "STATUS"} {
		t.Run("hanging server/"+cmd, func(t *testing.T) {
			g := NewWithT(t)
			fa, sock := startAgent(t)
			for _, m := range []string{"Add", "Delete", "Check", "GC", "Status"} {
				fa.hangOn(m)
			}
			o := run{Command: cmd, Conf: conf(sock)}.exec(t)
			g.Expect(o.ExitErr).To(BeTrue())
			e, err := o.Error()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(e.Code).To(BeEquivalentTo(11), "msg %q", e.Msg)
			g.Expect(e.Msg).To(ContainSubstring("DeadlineExceeded"))
			g.Expect(e.Msg).To(ContainSubstring("300ms"))
			g.Expect(o.Elapsed).To(BeNumerically(">=", timeout))
			g.Expect(fa.Calls()).To(HaveLen(1))
		})
	}
}

// A stream the agent ends at the call's own deadline reaches the client
// as Canceled or DeadlineExceeded, whichever side wins the race: both
// read as the timeout; a cancellation before the deadline stays one.
func TestTimedOutNamesTheDeadline(t *testing.T) {
	g := NewWithT(t)
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	live, cancelLive := context.WithCancel(context.Background())
	defer cancelLive()
	canceled := status.Error(codes.Canceled, "stream reset by the server")
	g.Expect(status.Code(timedOut(past, canceled))).To(Equal(codes.DeadlineExceeded))
	g.Expect(status.Convert(timedOut(past, canceled)).Message()).To(Equal("stream reset by the server"))
	g.Expect(status.Code(timedOut(live, canceled))).To(Equal(codes.Canceled))
	unavailable := status.Error(codes.Unavailable, "connection refused")
	g.Expect(timedOut(past, unavailable)).To(BeIdenticalTo(unavailable))
}
