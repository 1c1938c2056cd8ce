package rest_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/logging/logtest"
	"github.com/contiv-ipam/agent/infra/rest"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer = logtest.Buffer

// logTo makes the plugin log into out through a registry of its own.
func logTo(out io.Writer, level string) rest.Option {
	return rest.UseDeps(func(d *rest.Deps) {
		lvl, _ := logging.ParseLevel(level)
		d.LogRegistry = logging.NewRegistry(logging.WithOutput(out), logging.WithLevel(lvl))
	})
}

// loopback returns the default config on 127.0.0.1:0.
func loopback() rest.Config {
	c := rest.DefaultConfig()
	c.Endpoint = "127.0.0.1:0"
	return c
}

// started builds a plugin with conf, runs Init and AfterInit, and closes it
// when the test ends.
func started(t *testing.T, conf rest.Config, opts ...rest.Option) *rest.Plugin {
	t.Helper()
	g := NewWithT(t)
	opts = append([]rest.Option{rest.UseConf(conf), logTo(io.Discard, "info")}, opts...)
	p := rest.NewPlugin(opts...)
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	t.Cleanup(func() { g.Expect(p.Close()).To(Succeed()) })
	return p
}

// get sends one request and returns status, body and the response headers.
func get(t *testing.T, c *http.Client, url string, header http.Header) (int, string, http.Header) {
	t.Helper()
	g := NewWithT(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body), resp.Header
}

// hello is a provider answering "hello" as text.
func hello(f *rest.Formatter) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { f.Text(w, http.StatusOK, "hello") }
}

func client() *http.Client {
	c := &http.Client{Timeout: 10 * time.Second}
	return c
}

// newPlugin builds a plugin with conf and a silent logger, not started.
func newPlugin(conf rest.Config) *rest.Plugin {
	return rest.NewPlugin(rest.UseConf(conf), logTo(io.Discard, "info"))
}
