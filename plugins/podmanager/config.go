package podmanager

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/infra"
	"github.com/contiv-ipam/agent/infra/config"
)

// DefaultSocketPath is where the agent serves the CNI API by default.
const DefaultSocketPath = "/var/run/contiv/cni.sock"

// maxSocketPath is the longest unix socket path the kernel accepts
// (sun_path is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// Config is podmanager.conf: where and how the CNI API is served.
type Config struct {
	// SocketPath is the unix socket contiv-cni dials. A relative path is
	// relative to the agent's working directory. Its directory is created
	// (mode 0700) when missing; the socket itself is always mode 0600.
	SocketPath string `json:"socketPath"`
	// RequestTimeout bounds one call inside the agent: the events it
	// pushes and the durable writes it waits for. The client's own
	// deadline applies on top.
	RequestTimeout time.Duration `json:"requestTimeout"`
	// MaxConnections is how many connections the socket keeps open at
	// once; further ones wait in the kernel's accept backlog until one
	// closes.
	MaxConnections int `json:"maxConnections"`
	// HandshakeTimeout closes a connection that has not completed the
	// gRPC (HTTP/2) handshake this long after it was accepted.
	HandshakeTimeout time.Duration `json:"handshakeTimeout"`
	// IdleTimeout closes a connection that has had no call in flight for
	// this long (contiv-cni dials anew for every call).
	IdleTimeout time.Duration `json:"idleTimeout"`

	// CRISocket is the node's container runtime (CRI) endpoint, a unix
	// socket path or "unix:///path" ("": no runtime witness). With it,
	// the agent rebuilds its local pods from the runtime's sandboxes at
	// start, releases a pod missing from Kubernetes only if the runtime
	// has no sandbox of it (never while the runtime cannot be asked), and
	// runs the CNI GC the runtime does not call (CRIGCPeriod).
	CRISocket string `json:"criSocket"`
	// CRITimeout bounds one call to the runtime (connecting included).
	CRITimeout time.Duration `json:"criTimeout"`
	// CRIListPeriod is how often the runtime's sandboxes are listed.
	CRIListPeriod time.Duration `json:"criListPeriod"`
	// CRIGCPeriod is the CNI GC's period: an attachment whose sandbox
	// two lists at least this far apart lack is released. 0: no GC. It
	// must exceed the longest RunPodSandbox: containerd lists a sandbox
	// only once it is started, after its CNI ADD.
	CRIGCPeriod time.Duration `json:"criGCPeriod"`
}

// DefaultConfig returns the defaults: /var/run/contiv/cni.sock, requests
// of at most 10s, 1024 connections, handshakes of at most 5s, idle
// connections closed after 2m.
func DefaultConfig() Config {
	return Config{
		SocketPath:       DefaultSocketPath,
		RequestTimeout:   10 * time.Second,
		MaxConnections:   1024,
		HandshakeTimeout: time.Second,
		IdleTimeout:      2 * time.Minute,
		CRITimeout:       2 * time.Second,
		CRIListPeriod:    10 * time.Second,
		CRIGCPeriod:      5 * time.Minute,
	}
}

// Validate names every bad key and value.
func (c *Config) Validate() error {
	var errs []error
	switch {
	case c.SocketPath == "":
		errs = append(errs, errors.New(`socketPath "": want the path of a unix socket`))
	case len(c.SocketPath) > maxSocketPath:
		errs = append(errs, fmt.Errorf("socketPath %q: %d bytes, a unix socket path has at most %d",
			c.SocketPath, len(c.SocketPath), maxSocketPath))
	case filepath.Base(c.SocketPath) == "." || filepath.Base(c.SocketPath) == "/" || c.SocketPath[len(c.SocketPath)-1] == '/':
		errs = append(errs, fmt.Errorf("socketPath %q: want a file name, not a directory", c.SocketPath))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("maxConnections %d: want at least 1", c.MaxConnections))
	}
	for _, d := range []struct {
		key string
		val time.Duration
	}{
		{"requestTimeout", c.RequestTimeout},
		{"handshakeTimeout", c.HandshakeTimeout},
		{"idleTimeout", c.IdleTimeout},
		{"criTimeout", c.CRITimeout},
		{"criListPeriod", c.CRIListPeriod},
	} {
		if d.val <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: want a positive duration", d.key, d.val))
		}
	}
	if c.CRIGCPeriod < 0 {
		errs = append(errs, fmt.Errorf("criGCPeriod %s: want a duration >= 0 (0: no GC)", c.CRIGCPeriod))
	}
	if err := validCRISocket(c.CRISocket); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validCRISocket accepts "", an absolute socket path and a unix:// URL
// of one.
func validCRISocket(s string) error {
	if s == "" {
		return nil
	}
	path, scheme := strings.CutPrefix(s, "unix://")
	switch {
	case !scheme && strings.Contains(s, "://"):
		return fmt.Errorf("criSocket %q: want a unix socket (a path or unix:///path)", s)
	case !filepath.IsAbs(path):
		return fmt.Errorf("criSocket %q: want an absolute path", s)
	case len(path) > maxSocketPath:
		return fmt.Errorf("criSocket %q: %d bytes, a unix socket path has at most %d", s, len(path), maxSocketPath)
	}
	return nil
}

var _ infra.ConfigLoader = (*Plugin)(nil)

// LoadConfig decodes and validates podmanager.conf before any plugin's
// Init, and looks at socketPath without changing anything: a socket
// another agent serves, or a path that is not a socket, stops the agent
// before any plugin has created anything. (AfterInit checks again, and
// only then replaces a stale socket.)
func (p *Plugin) LoadConfig() error {
	if err := p.loaded.Load(p.decodeConfig); err != nil {
		return err
	}
	cfg, err := p.loadConfig()
	if err != nil {
		return err
	}
	_, err = probeSocket(cfg.SocketPath)
	return err
}

// loadConfig returns LoadConfig's config, else decodes it now (without
// the agent's LoadConfig phase, as in unit tests).
func (p *Plugin) loadConfig() (Config, error) { return p.loaded.Get(p.decodeConfig) }

// decodeConfig is the config given with UseConf, else podmanager.conf on
// top of the defaults.
func (p *Plugin) decodeConfig() (Config, error) {
	return config.LoadOrFixed(p.Cfg, p.fixedConf, DefaultConfig())
}
