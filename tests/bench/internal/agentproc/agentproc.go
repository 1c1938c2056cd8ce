// Package agentproc runs the real contiv-agent binary (built by
// tests/testenv) as the benchmarks of tests/bench measure it: exec on a
// config directory, the "agent ready" log line (it names the REST port the
// kernel chose), /readiness polled until 200, peak RSS, SIGINT.
//
// Owner: a Proc belongs to the goroutine that started it; its log reader
// goroutine writes only the last record of each message (under a mutex)
// and the ready and exit channels.
package agentproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	// PollPeriod is the pause between two GETs of /readiness: it bounds
	// the error of a start-to-ready measure.
	PollPeriod = 2 * time.Millisecond
)

// Proc is one run of the real contiv-agent binary on a config directory.
// Owner: the goroutine that started it; the log reader goroutine writes
// only last (under mu), ready and done.
type Proc struct {
	cmd  *exec.Cmd
	done chan error // the exit status, once
	rest string     // REST base, from the "agent ready" line

	ready  chan string // the REST base of the "agent ready" line
	exited bool        // done has been read

	mu   sync.Mutex
	last map[string]map[string]any // the last log record of each message
}

// Start execs the agent on dir (config files written by the caller) for
// node and returns at once; the caller waits with WaitReady.
func Start(dir, node string) (*Proc, error) { return StartBinary(testenv.Binaries().Agent, dir, node) }

// StartBinary is Start with another build of contiv-agent (the image's,
// without the embedded etcd server).
func StartBinary(bin, dir, node string) (*Proc, error) {
	logs, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env = dir, testenv.AgentEnv(dir, node)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		_ = logs.Close()
		return nil, err
	}
	a := &Proc{cmd: cmd, done: make(chan error, 1), ready: make(chan string, 1), last: map[string]map[string]any{}}
	if err := cmd.Start(); err != nil {
		_ = logs.Close()
		return nil, err
	}
	go a.readLog(stderr, logs)
	return a, nil
}

// readLog keeps every line in agent.log and the last record of each
// message, announces "agent ready", then sends the exit status.
func (a *Proc) readLog(stderr io.Reader, logs *os.File) {
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

// Rest is the REST base URL the "agent ready" line named ("" before
// WaitReady saw it).
func (a *Proc) Rest() string { return a.rest }

// WaitReady waits for the "agent ready" line (it names the REST port the
// kernel chose), then polls /readiness (PollReady) until it answers 200.
func (a *Proc) WaitReady() error {
	deadline := time.After(readyTimeout)
	select {
	case a.rest = <-a.ready:
	case err := <-a.done:
		a.exited = true
		return fmt.Errorf("agent exited before it was ready: %v", err)
	case <-deadline:
		return fmt.Errorf("no \"agent ready\" line within %v", readyTimeout)
	}
	_, err := PollReady(a.rest, a.done, deadline)
	if errors.Is(err, ErrExited) {
		a.exited = true
	}
	return err
}

// ErrExited: the process ended while its readiness was polled.
var ErrExited = errors.New("agent exited before /readiness answered 200")

// PollReady GETs base+"/readiness" every PollPeriod until it answers 200
// and returns the number of GETs; it gives up when done delivers (the
// process exited) or at deadline.
func PollReady(base string, done <-chan error, deadline <-chan time.Time) (int, error) {
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
			return polls, fmt.Errorf("%w: %v", ErrExited, err)
		case <-deadline:
			return polls, fmt.Errorf("/readiness not 200 within %v", readyTimeout)
		case <-time.After(PollPeriod):
		}
	}
}

// Logged returns the last record of message msg, nil when none.
func (a *Proc) Logged(msg string) map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[msg]
}

// PeakRSS is the process's VmHWM (peak resident set) in MiB.
func (a *Proc) PeakRSS() (float64, error) { return a.status("VmHWM:") }

// RSS is the process's VmRSS (resident set now) in MiB.
func (a *Proc) RSS() (float64, error) { return a.status("VmRSS:") }

// status reads a field in kB of /proc/<pid>/status, in MiB.
func (a *Proc) status(field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, a.cmd.Process.Pid)
}

// Stop sends SIGINT and waits for the exit (SIGKILL after stopTimeout).
func (a *Proc) Stop() error {
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

// Kill ends a run that is still going (cleanup after a failure).
func (a *Proc) Kill() {
	if !a.exited {
		a.exited = true
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// GetJSON decodes GET url into out.
func GetJSON(url string, out any) error {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, out)
}
