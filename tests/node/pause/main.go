//go:build node

// Command pause is the sandbox ("pause") image of tests/node: it holds a
// pod's namespaces open until containerd stops the sandbox. As process 1
// of the sandbox it reaps every child handed to it and exits 0 on
// SIGTERM or SIGINT. tests/node builds it static (CGO_ENABLED=0) and
// packs it into an OCI archive (images.go).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap waits for every child that has ended, without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
