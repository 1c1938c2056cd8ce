package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Proc is a child process in a process group of its own, with its
// stdout and stderr in a log file. Its reader goroutine only writes the
// log file and reports the ready line; its waiter goroutine only reaps the
// process and records the exit error.
type Proc struct {
	// Name names the process in errors and its log file (<Name>.log).
	Name string
	// Dir is its working and config directory.
	Dir string
	// Log is the file holding everything it wrote.
	Log string

	cmd   *exec.Cmd
	ready chan string   // the value of the ready line, sent once
	done  chan struct{} // closed once the process is reaped
	err   error         // the exit error; read only after done
}

// procSpec says how to run one process and how it tells it is ready.
type procSpec struct {
	name, bin, dir string
	args, env      []string
	// ready returns the value of the line that says the process is ready
	// (an address), and whether rec is that line.
	ready func(rec map[string]any) (string, bool)
}

// startProc starts s in its own process group; the kernel kills it with
// SIGKILL if this process dies first (Pdeathsig).
func startProc(s procSpec) (*Proc, error) {
	p := &Proc{Name: s.name, Dir: s.dir, Log: filepath.Join(s.dir, s.name+".log"),
		ready: make(chan string, 1), done: make(chan struct{})}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	p.cmd = exec.Command(s.bin, s.args...)
	p.cmd.Dir, p.cmd.Env = s.dir, s.env
	p.cmd.Stdout, p.cmd.Stderr = w, w
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = p.cmd.Start()
	_ = w.Close() // the child holds its own copy
	if err != nil {
		_ = r.Close()
		_ = logf.Close()
		return nil, fmt.Errorf("%s: start %s: %w", s.name, s.bin, err)
	}
	go p.read(r, logf, s.ready)
	go p.wait()
	return p, nil
}

// read copies every line into the log file and sends the first ready
// value.
func (p *Proc) read(r io.ReadCloser, logf *os.File, ready func(map[string]any) (string, bool)) {
	defer func() { _ = r.Close() }()
	defer func() { _ = logf.Close() }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	sent := false
	for sc.Scan() {
		_, _ = logf.Write(append(sc.Bytes(), '\n'))
		if sent || ready == nil {
			continue
		}
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if v, ok := ready(rec); ok {
			p.ready <- v
			sent = true
		}
	}
}

// wait reaps the process.
func (p *Proc) wait() {
	p.err = p.cmd.Wait()
	close(p.done)
}

// PID is the process ID (and its process group's).
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Running tells whether the process has not been reaped yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Done is closed once the process has ended and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// waitReady returns the ready line's value, or an error with the end of
// the log when the process exits first or timeout passes.
func (p *Proc) waitReady(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-p.ready:
		return v, nil
	case <-p.done:
		return "", fmt.Errorf("%s exited before it was ready (%v); %s", p.Name, p.err, p.tail())
	case <-t.C:
		return "", fmt.Errorf("%s not ready after %s; %s", p.Name, timeout, p.tail())
	case <-ctx.Done():
		return "", fmt.Errorf("%s: %w", p.Name, ctx.Err())
	}
}

// tail is the end of the log, for errors.
func (p *Proc) tail() string {
	data, err := os.ReadFile(p.Log)
	if err != nil {
		return "no log: " + err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "log " + p.Log + " ends with:\n" + strings.Join(lines, "\n")
}

// signal sends sig to the process group, unless the process is reaped.
func (p *Proc) signal(sig syscall.Signal) error {
	if !p.Running() {
		return nil
	}
	if err := syscall.Kill(-p.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: %s: %w", p.Name, sig, err)
	}
	return nil
}

// Kill sends SIGKILL to the process group and waits until the process
// is reaped.
func (p *Proc) Kill() error {
	err := p.signal(syscall.SIGKILL)
	<-p.done
	return err
}

// Stop sends SIGINT to the process group and returns the exit error:
// nil after exit status 0, or after an end by SIGINT itself (the etcd
// server re-raises it once it has shut down cleanly). A process still
// running after timeout is killed, and the error says so.
func (p *Proc) Stop(timeout time.Duration) error {
	if err := p.signal(syscall.SIGINT); err != nil {
		return err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		if p.err != nil && !endedBy(p.err, syscall.SIGINT) {
			return fmt.Errorf("%s: %w; %s", p.Name, p.err, p.tail())
		}
		return nil
	case <-t.C:
		return errors.Join(fmt.Errorf("%s still ran %s after SIGINT; killed", p.Name, timeout), p.Kill())
	}
}

// endedBy tells whether err is the exit error of a process ended by sig.
func endedBy(err error, sig syscall.Signal) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
