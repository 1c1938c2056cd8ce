package etcdtest

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/internal/embedded"
)

// Option changes how Start runs the server.
type Option func(*options)

type options struct {
	port int
	log  *slog.Logger
}

// WithPort makes the server listen for clients on 127.0.0.1:port (default
// 0: a free port).
func WithPort(port int) Option { return func(o *options) { o.port = port } }

// WithLogger sends etcd's warnings and errors to log (default: discarded).
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// Server is a running (or stopped) test etcd.
type Server struct {
	tb  testing.TB
	cfg embedded.Config

	mu  sync.Mutex
	srv *embedded.Server
}

// Start runs an etcd server and registers its Stop with tb.Cleanup.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{tb: tb, cfg: embedded.Config{
		Dir:           filepath.Join(tb.TempDir(), "etcd"),
		ClientURL:     fmt.Sprintf("http://127.0.0.1:%d", o.port),
		PeerURL:       "http://127.0.0.1:0",
		Log:           o.log,
		UnsafeNoFsync: true,
	}}
	s.start()
	// Later restarts reuse the ports picked now.
	s.cfg.ClientURL, s.cfg.PeerURL = s.srv.ClientURL(), s.srv.PeerURL()
	tb.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.tb.Helper()
	srv, err := embedded.Start(s.cfg)
	if err != nil {
		s.tb.Fatalf("etcdtest: %v", err)
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// Endpoint returns the client address, "127.0.0.1:<port>"; it stays the
// same across Restart.
func (s *Server) Endpoint() string { return s.ClientURL()[len("http://"):] }

// ClientURL returns "http://127.0.0.1:<port>".
func (s *Server) ClientURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return s.srv.ClientURL()
	}
	return s.cfg.ClientURL
}

// Stop stops the server; clients see it as unreachable. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Restart stops the server if it runs, then starts it again with the same
// data directory and ports.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.start()
}

// Client returns a new raw client of the server, closed by tb.Cleanup.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return newClient(tb, s.Endpoint())
}

// newClient returns a raw client of endpoint, closed by tb.Cleanup.
func newClient(tb testing.TB, endpoint string) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}
