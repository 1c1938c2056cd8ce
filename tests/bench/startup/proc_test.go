package startup

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/contiv-ipam/agent/tests/testenv"
)

// Bounds of one agent process.
const (
	readyTimeout = 2 * time.Minute
	stopTimeout  = 30 * time.Second
	// pollPeriod is the pause between two GETs of /readiness.
	pollPeriod = 2 * time.Millisecond
)

// agentProc is one run of the real contiv-agent binary on a config
// directory. Owner: the benchmark goroutine; the log reader goroutine
// writes only last (under mu) and ready.
type agentProc struct {
	cmd  *exec.Cmd
	done chan error // the exit status, once
	rest string     // REST base, from the "agent ready" line

	ready  chan string // the REST base of the "agent ready" line
	exited bool        // done has been read

	mu   sync.Mutex
	last map[string]map[string]any // the last log record of each message
}

// startAgent execs the agent on dir (config files written by the caller)
// for node and returns at once; the caller waits with waitReady.
func startAgent(dir, node string) (*agentProc, error) {
	logs, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(testenv.Binaries().Agent)
	cmd.Dir, cmd.Env = dir, testenv.AgentEnv(dir, node)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		_ = logs.Close()
		return nil, err
	}
	a := &agentProc{cmd: cmd, done: make(chan error, 1), ready: make(chan string, 1), last: map[string]map[string]any{}}
	if err := cmd.Start(); err != nil {
		_ = logs.Close()
		return nil, err
	}
	go a.readLog(stderr, logs)
	return a, nil
}

// readLog keeps every line in agent.log and the last record of each
// message, announces "agent ready", then sends the exit status.
func (a *agentProc) readLog(stderr io.Reader, logs *os.File) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		_, _ = logs.Write(append(sc.Bytes(), '\n'))
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		msg, _ := rec["msg"].(string)
		a.mu.Lock()
		a.last[msg] = rec
		a.mu.Unlock()
		if msg == "agent ready" {
			a.ready <- strings.TrimSuffix(fmt.Sprint(rec["rest"]), "/")
		}
	}
	_ = logs.Close()
	a.done <- a.cmd.Wait()
}

// waitReady waits for the "agent ready" line (it names the REST port the
// kernel chose), then polls /readiness (pollReady) until it answers 200.
func (a *agentProc) waitReady() error {
	deadline := time.After(readyTimeout)
	select {
	case a.rest = <-a.ready:
	case err := <-a.done:
		a.exited = true
		return fmt.Errorf("agent exited before it was ready: %v", err)
	case <-deadline:
		return fmt.Errorf("no \"agent ready\" line within %v", readyTimeout)
	}
	_, err := pollReady(a.rest, a.done, deadline)
	if errors.Is(err, errExited) {
		a.exited = true
	}
	return err
}

// errExited: the process ended while its readiness was polled.
var errExited = errors.New("agent exited before /readiness answered 200")

// pollReady GETs base+"/readiness" every pollPeriod until it answers 200
// and returns the number of GETs; it gives up when done delivers (the
// process exited) or at deadline.
func pollReady(base string, done <-chan error, deadline <-chan time.Time) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	for polls := 1; ; polls++ {
		resp, err := client.Get(base + "/readiness")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return polls, nil
			}
		}
		select {
		case err := <-done:
			return polls, fmt.Errorf("%w: %v", errExited, err)
		case <-deadline:
			return polls, fmt.Errorf("/readiness not 200 within %v", readyTimeout)
		case <-time.After(pollPeriod):
		}
	}
}

// stop sends SIGINT and waits for the exit (SIGKILL after stopTimeout).
func (a *agentProc) stop() error {
	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return err
	}
	a.exited = true
	select {
	case err := <-a.done:
		return err
	case <-time.After(stopTimeout):
		_ = a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("agent did not stop within %v of SIGINT", stopTimeout)
	}
}

// kill ends a run that is still going (cleanup after a failure).
func (a *agentProc) kill() {
	if !a.exited {
		a.exited = true
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}
