//go:build node

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// envtestFile, in a node's RunDir, lists the envtest processes of the
// node (kube-apiserver and its etcd, "<pid> <start time>" a line):
// envtest starts them without a parent-death signal, so a test process
// killed before Stop leaves them running; SweepStale kills them.
const envtestFile = "envtest.pids"

// envtestNames are the commands envtest starts.
var envtestNames = map[string]bool{"kube-apiserver": true, "etcd": true}

// recordEnvtest writes envtestFile: this process's children that are
// envtest's commands (called right after kubeenv.Start).
func (n *Node) recordEnvtest() error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !envtestChild(pid) {
			continue
		}
		if start, err := procStartTime(pid); err == nil {
			lines = append(lines, fmt.Sprintf("%d %s", pid, start))
		}
	}
	return os.WriteFile(filepath.Join(n.RunDir, envtestFile), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// envtestChild tells whether pid is a child of this process running one
// of envtestNames.
func envtestChild(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return false
	}
	fields := strings.Fields(s[end+1:])
	return len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) && envtestNames[s[open+1:end]]
}

// killEnvtest kills the processes envtestFile of runDir lists that still
// run (same PID, same start time).
func killEnvtest(runDir string) error {
	data, err := os.ReadFile(filepath.Join(runDir, envtestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var pid int
		var start string
		if _, err := fmt.Sscanf(line, "%d %s", &pid, &start); err != nil {
			continue
		}
		if now, err := procStartTime(pid); err != nil || now != start {
			continue // gone, or the PID is another process's now
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("killing envtest's process %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}
