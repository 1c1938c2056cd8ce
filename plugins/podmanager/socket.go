package podmanager

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Errors of the socket set-up; each is wrapped with the path.
var (
	// ErrSocketInUse: another live process accepts connections on the
	// socket path (another agent serves it).
	ErrSocketInUse = errors.New("another agent serves it")
	// ErrNotSocket: the socket path exists and is not a socket; it is
	// never removed.
	ErrNotSocket = errors.New("exists and is not a unix socket; it was left untouched")
)

// socketMode is the mode of the socket file: only the agent's user
// (root) may connect.
const socketMode fs.FileMode = 0o600

// probeTimeout bounds the dial that tells a live socket from a stale one.
const probeTimeout = time.Second

// socket is the listening unix socket of the CNI API.
type socket struct {
	path string
	ln   *net.UnixListener
	info fs.FileInfo // the socket file we created, to remove only that one
}

// listenSocket creates the socket at path with mode 0600 and listens on it.
//
// No other user can ever connect while the mode is wider: the socket is
// created inside a fresh private directory (mode 0700, next to path so that
// it is on the same file system), chmod-ed to 0600 there, and only then
// hard-linked to path. link(2) fails when path exists, so a socket another
// agent created meanwhile is never replaced. No umask is changed (the umask
// is per process, and other plugins create files concurrently).
//
// Before that, path is checked: absent is fine; a socket nobody accepts on
// (connection refused) is stale and removed; a socket that accepts is
// ErrSocketInUse; anything else (a file, a directory, a symlink) is
// ErrNotSocket and left alone.
func listenSocket(path string, log *slog.Logger) (*socket, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("socket %q: creating its directory: %w", path, err)
	}
	if err := clearStale(path, log); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp(dir, ".pm")
	if err != nil {
		return nil, fmt.Errorf("socket %q: creating a private directory beside it: %w", path, err)
	}
	defer func() { _ = os.RemoveAll(private) }()
	tmp := filepath.Join(private, "s")
	if len(tmp) > maxSocketPath {
		return nil, fmt.Errorf("socket %q: the temporary socket %q is longer than %d bytes; use a shorter socketPath",
			path, tmp, maxSocketPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("socket %q: listen: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // the name is gone; Close removes path itself
	s, err := publish(ln, tmp, path)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return s, nil
}

// publish sets the mode of the socket tmp and links it to path.
func publish(ln *net.UnixListener, tmp, path string) (*socket, error) {
	if err := os.Chmod(tmp, socketMode); err != nil {
		return nil, fmt.Errorf("socket %q: chmod %o: %w", path, socketMode, err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("socket %q: created by another process while this agent started: %w", path, ErrSocketInUse)
		}
		return nil, fmt.Errorf("socket %q: %w", path, err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("socket %q: %w", path, err)
	}
	return &socket{path: path, ln: ln, info: info}, nil
}

// clearStale removes a stale socket at path; see listenSocket.
func clearStale(path string, log *slog.Logger) error {
	stale, err := probeSocket(path)
	if err != nil || !stale {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("socket %q: removing the stale socket: %w", path, err)
	}
	log.Info("removed a stale socket (nothing accepted on it)", "path", path)
	return nil
}

// probeSocket tells what is at path without changing anything: stale is
// true for a socket nobody accepts on; nothing there is (false, nil); a
// live socket is ErrSocketInUse and anything else ErrNotSocket.
func probeSocket(path string) (stale bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("socket %q: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return false, fmt.Errorf("socket %q (a %s): %w", path, fileKind(fi.Mode()), ErrNotSocket)
	}
	conn, err := net.DialTimeout("unix", path, probeTimeout)
	switch {
	case err == nil:
		_ = conn.Close()
		return false, fmt.Errorf("socket %q: %w (it accepted a connection); stop that agent or set another socketPath in podmanager.conf",
			path, ErrSocketInUse)
	case errors.Is(err, syscall.ECONNREFUSED):
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("socket %q: cannot tell whether another agent serves it: %w", path, err)
}

// remove deletes the socket file if it is still the one we created.
func (s *socket) remove() error {
	fi, err := os.Lstat(s.path)
	if err != nil || !os.SameFile(fi, s.info) {
		return nil // gone, or replaced by someone else: not ours
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing socket %q: %w", s.path, err)
	}
	return nil
}

// fileKind names the type of a file that is not a socket.
func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeNamedPipe:
		return "named pipe"
	}
	return "special file (" + m.Type().String() + ")"
}
