package resync

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
// kernel chose), then GETs /readiness every pollPeriod until it answers
// 200.
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
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := client.Get(a.rest + "/readiness")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-a.done:
			a.exited = true
			return fmt.Errorf("agent exited before /readiness answered 200: %v", err)
		case <-deadline:
			return fmt.Errorf("/readiness not 200 within %v", readyTimeout)
		case <-time.After(pollPeriod):
		}
	}
}

// logged returns the last record of message msg, nil when none.
func (a *agentProc) logged(msg string) map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[msg]
}

// peakRSS is the process's VmHWM (peak resident set) in MiB.
func (a *agentProc) peakRSS() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/<pid>/status")
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

// getJSON decodes GET base+path into out.
func getJSON(url string, out any) error {
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
