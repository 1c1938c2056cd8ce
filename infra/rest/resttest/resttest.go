package resttest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/rest"
)

// requestTimeout bounds every request a helper sends.
const requestTimeout = 10 * time.Second

// Server is a started REST plugin bound to one test.
type Server struct {
	Plugin *rest.Plugin
	t      testing.TB
	client *http.Client
}

// New builds, initialises and starts a REST plugin on 127.0.0.1:0 with the
// default timeouts, no TLS and no authentication; opts run after those
// defaults and may replace them (rest.UseConf, rest.UseDeps). The plugin is
// closed when the test ends; a Close error fails the test.
func New(t testing.TB, opts ...rest.Option) *Server {
	t.Helper()
	base := []rest.Option{
		rest.UseConf(Config()),
		rest.UseDeps(func(d *rest.Deps) {
			d.LogRegistry = logging.NewRegistry(logging.WithOutput(io.Discard))
		}),
	}
	p := rest.NewPlugin(append(base, opts...)...)
	if err := p.Init(); err != nil {
		t.Fatalf("resttest: rest plugin Init: %v", err)
	}
	if err := p.AfterInit(); err != nil {
		_ = p.Close()
		t.Fatalf("resttest: rest plugin AfterInit: %v", err)
	}
	s := &Server{Plugin: p, t: t, client: &http.Client{Timeout: requestTimeout}}
	t.Cleanup(func() {
		s.client.CloseIdleConnections()
		if err := p.Close(); err != nil {
			t.Errorf("resttest: rest plugin Close: %v", err)
		}
	})
	return s
}

// Config is the config New starts with: the defaults on 127.0.0.1:0. Start
// from it to add TLS or authentication with rest.UseConf.
func Config() rest.Config {
	c := rest.DefaultConfig()
	c.Endpoint = "127.0.0.1:0"
	return c
}

// URL returns the server's base URL, such as "http://127.0.0.1:41234"
// ("https://..." when the server speaks HTTPS).
func (s *Server) URL() string {
	if s.Plugin.TLS() {
		return "https://" + s.Plugin.Addr()
	}
	return "http://" + s.Plugin.Addr()
}

// WithClient returns a Server of the same plugin whose helpers send with
// c (a PKI client, say); c's idle connections are closed when the test
// ends.
func (s *Server) WithClient(c *http.Client) *Server {
	s.t.Cleanup(c.CloseIdleConnections)
	return &Server{Plugin: s.Plugin, t: s.t, client: c}
}

// Client returns the HTTP client the helpers use.
func (s *Server) Client() *http.Client { return s.client }

// Get sends GET path and returns the status code and body.
func (s *Server) Get(path string) (int, string) {
	s.t.Helper()
	return s.Do(http.MethodGet, path, "", nil)
}

// Put sends PUT path with body and returns the status code and body.
func (s *Server) Put(path, body string) (int, string) {
	s.t.Helper()
	return s.Do(http.MethodPut, path, body, nil)
}

// Post sends POST path with body and returns the status code and body.
func (s *Server) Post(path, body string) (int, string) {
	s.t.Helper()
	return s.Do(http.MethodPost, path, body, nil)
}

// Do sends one request with the given headers (may be nil) and returns the
// status code and body. Call it from the test goroutine: it fails the test
// with t.Fatalf on transport errors.
func (s *Server) Do(method, path, body string, header http.Header) (int, string) {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.URL()+path, rd)
	if err != nil {
		s.t.Fatalf("resttest: %s %s: %v", method, path, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("resttest: %s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("resttest: %s %s: reading body: %v", method, path, err)
	}
	return resp.StatusCode, string(data)
}
