package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// openLog opens the logFile of the config for appending and returns a
// logger writing to it and the function that closes it. Without a
// logFile the logs are dropped: stdout belongs to the CNI protocol, and
// stderr is kept quiet. A log file that cannot be opened does not fail
// the call (the pod's network matters more than its log): one line on
// stderr says why.
func openLog(path string) (*slog.Logger, func()) {
	if path == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil)), func() {}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		fmt.Fprintf(os.Stderr, "contiv-cni: logFile %q: %v; logging disabled\n", path, err)
		return slog.New(slog.NewTextHandler(io.Discard, nil)), func() {}
	}
	h := slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})
	logger := slog.New(h).With("pid", os.Getpid())
	return logger, func() { _ = f.Close() }
}
