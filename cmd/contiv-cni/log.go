package main

import (
	"fmt"
	"log/slog"
	"os"
)

// openLog opens the logFile of the config for appending and returns a
// logger writing to it and the function that closes it. Without a
// logFile the logs are dropped: stdout belongs to the CNI protocol, and
// stderr is kept quiet. A log file that cannot be opened does not fail
// the call (the pod's network matters more than its log): one line on
// stderr says why. Dropped logs go to slog.DiscardHandler, which formats
// nothing (a text handler writing to io.Discard formats every record,
// and its first timestamp loads the local time zone).
func openLog(path string) (*slog.Logger, func()) {
	if path == "" {
		return slog.New(slog.DiscardHandler), func() {}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		fmt.Fprintf(os.Stderr, "contiv-cni: logFile %q: %v; logging disabled\n", path, err)
		return slog.New(slog.DiscardHandler), func() {}
	}
	h := slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})
	logger := slog.New(h).With("pid", os.Getpid())
	return logger, func() { _ = f.Close() }
}
