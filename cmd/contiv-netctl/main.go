package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
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
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// run runs one command line and returns the exit code: 0 done, 1 the
// command failed (the message on stderr), 2 a usage error (the message and
// the usage on stderr). -h prints the usage on stdout and returns 0.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	err := dispatch(ctx, args, &cmdIO{stdin: stdin, stdout: stdout, stderr: stderr, env: env})
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
