package embedded

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Config describes one embedded single-member server.
type Config struct {
	// Dir is the data directory; etcd creates it (mode 0700) if missing.
	Dir string
	// ClientURL and PeerURL are http URLs on a loopback IP; port 0 picks a
	// free port.
	ClientURL, PeerURL string
	// Log receives etcd's warnings and errors; nil discards them.
	Log *slog.Logger
	// StartTimeout bounds the wait for the server to be ready (default 30s).
	StartTimeout time.Duration
	// UnsafeNoFsync disables fsync: tests only.
	UnsafeNoFsync bool
}

// CheckLoopback returns an error unless raw is an http URL whose host is a
// loopback IP address and whose port is a number.
func CheckLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("invalid URL %q: %w", raw, err)
	}
	if u.Scheme != "http" {
		return fmt.Errorf("URL %q: scheme must be http (the embedded server serves plain HTTP on loopback)", raw)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("URL %q: host must be a loopback IP address such as 127.0.0.1", raw)
	}
	if _, err := strconv.ParseUint(u.Port(), 10, 16); err != nil {
		return fmt.Errorf("URL %q: needs a port number (0 picks a free one)", raw)
	}
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf("URL %q: must not have a path", raw)
	}
	return nil
}
