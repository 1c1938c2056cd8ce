package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Set by the linker (see the Makefile).
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &cmdIO{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, env: os.LookupEnv,
		now: time.Now, tty: isTerminal(os.Stdout)})
	stop()
	os.Exit(code)
}

// run runs one command line and returns the exit code: 0 done, 1 the
// command failed (the message on stderr), 2 a usage error (the message and
// the usage on stderr). -h prints the usage on stdout and returns 0.
func run(ctx context.Context, args []string, cio *cmdIO) int {
	if cio.now == nil {
		cio.now = time.Now
	}
	stdout, stderr := cio.stdout, cio.stderr
	err := dispatch(ctx, args, cio)
	var help *helpRequest
	var usage *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &help):
		help.usage(stdout)
		return exitOK
	case errors.As(err, &usage):
		_, _ = fmt.Fprintf(stderr, "contiv-netctl: %s\n\n", usage.msg)
		usage.usage(stderr)
		return exitUsage
	}
	_, _ = fmt.Fprintf(stderr, "contiv-netctl: %v\n", err)
	return exitError
}

// isTerminal tells whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
