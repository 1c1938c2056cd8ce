package testenv

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// TestAnAgentThatDiesOnItsOwnIsSeenAsEnded kills the agent behind the
// Agent's back while Running is polled (under -race this pins that Running
// never reads the state the log reader writes), then checks that Stop
// returns the exit error and that Start runs it again on the same data.
func TestAnAgentThatDiesOnItsOwnIsSeenAsEnded(t *testing.T) {
	a := StartAgent(t, Options{Node: "testenv-self"})
	if !a.Running() {
		t.Fatal("Running() = false right after StartAgent")
	}
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for a.Running() {
		if time.Now().After(deadline) {
			t.Fatal("Running() still true 30s after the agent was killed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var exit *exec.ExitError
	if err := a.Stop(t); !errors.As(err, &exit) {
		t.Fatalf("Stop() of a killed agent = %v, want its exit error", err)
	}
	a.Start(t)
	if code, _ := a.Get(t, "/readiness"); code != 200 {
		t.Fatalf("/readiness after a new Start = %d, want 200", code)
	}
}

func TestDualStackConfShrinksThePodSubnets(t *testing.T) {
	conf := DualStackConf(t)
	for _, want := range []string{"  podSubnetOneNodePrefixLen: 28", "    podSubnetCIDR: fd00:10:1::/112", "    podSubnetOneNodePrefixLen: 120"} {
		if !strings.Contains(conf, want+"\n") && !strings.Contains(conf, want+" ") {
			t.Errorf("DualStackConf lacks %q:\n%s", want, conf)
		}
	}
}
