//go:build node

package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is one run of a child process: in a process group of its own (a
// terminal's Ctrl-C reaches only the test), killed by the kernel with
// SIGKILL if the test process dies first (Pdeathsig), its stdout and
// stderr appended to a log file. Its waiter goroutine only reaps the
// process and records the exit error before it closes done.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit error; read only after done
}

// startProc runs bin with args and env (nil: this process's) in dir,
// logging to dir/<name>.log.
func startProc(name, dir, bin string, args, env []string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer func() { _ = logf.Close() }() // the child holds its own copy
	_, _ = fmt.Fprintf(logf, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process ID, which is also its process group's.
func (p *proc) PID() int { return p.cmd.Process.Pid }

// running tells whether the process has not been reaped yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// exitErr is the exit error once the process has ended ("running"
// before).
func (p *proc) exitErr() error {
	if p.running() {
		return errors.New("running")
	}
	return p.err
}

// stop sends SIGTERM to the process group and waits for the process;
// after timeout it sends SIGKILL and says so. A process that ended on
// its own is left alone.
func (p *proc) stop(timeout time.Duration) error {
	if !p.running() {
		return nil
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return errors.Join(fmt.Errorf("%s (pid %d) still ran %s after SIGTERM; killed", p.name, p.PID(), timeout), p.kill())
	}
}

// kill sends SIGKILL to the process group and waits until the process
// is reaped.
func (p *proc) kill() error {
	if !p.running() {
		return nil
	}
	if err := syscall.Kill(-p.PID(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: SIGKILL: %w", p.name, err)
	}
	<-p.done
	return nil
}

// tail is the end of the log, for errors.
func (p *proc) tail(n int) string {
	return tailFile(p.log, n)
}

// tailFile is the last n lines of file.
func tailFile(file string, n int) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return "no log: " + err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "log " + file + " ends with:\n" + strings.Join(lines, "\n")
}
