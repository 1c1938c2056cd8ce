package logging

import (
	"fmt"
	"log/slog"
	"strings"
)

// LevelTrace is one step more verbose than slog.LevelDebug.
const LevelTrace = slog.LevelDebug - 4

// ParseLevel turns a level name (trace, debug, info, warn, warning, error;
// any case) into a slog.Level.
func ParseLevel(name string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "trace":
		return LevelTrace, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want trace, debug, info, warn or error)", name)
}

// LevelName is the inverse of ParseLevel: the lower-case name of a level.
func LevelName(l slog.Level) string {
	switch {
	case l <= LevelTrace:
		return "trace"
	case l <= slog.LevelDebug:
		return "debug"
	case l <= slog.LevelInfo:
		return "info"
	case l <= slog.LevelWarn:
		return "warn"
	}
	return "error"
}
