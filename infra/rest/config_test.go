package rest_test

import (
	"crypto/x509"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/rest"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(c *rest.Config)
		wantErr []string
		notIn   string
	}{
		{name: "defaults are valid", edit: func(*rest.Config) {}},
		{name: "port zero", edit: func(c *rest.Config) { c.Endpoint = "127.0.0.1:0" }},
		{name: "IPv6 endpoint", edit: func(c *rest.Config) { c.Endpoint = "[::1]:9999" }},
		{name: "all interfaces", edit: func(c *rest.Config) { c.Endpoint = ":9999" }},
		{name: "endpoint without port", edit: func(c *rest.Config) { c.Endpoint = "127.0.0.1" },
			wantErr: []string{"endpoint", `"127.0.0.1"`}},
		{name: "endpoint port out of range", edit: func(c *rest.Config) { c.Endpoint = "127.0.0.1:70000" },
			wantErr: []string{"endpoint", "70000"}},
		{name: "endpoint port not a number", edit: func(c *rest.Config) { c.Endpoint = "localhost:http" },
			wantErr: []string{"endpoint", `"http"`}},
		{name: "cert without key", edit: func(c *rest.Config) { c.ServerCertFile = "s.crt" },
			wantErr: []string{"server-cert-file", `"s.crt"`, "server-key-file"}},
		{name: "key without cert", edit: func(c *rest.Config) { c.ServerKeyFile = "s.key" },
			wantErr: []string{"server-key-file", `"s.key"`}},
		{name: "client CAs without TLS", edit: func(c *rest.Config) { c.ClientCertFiles = []string{"ca.crt"} },
			wantErr: []string{"client-cert-files", "ca.crt", "HTTPS"}},
		{name: "basic auth without colon", edit: func(c *rest.Config) { c.ClientBasicAuth = []string{"a:b", "secretword"} },
			wantErr: []string{"client-basic-auth[1]", "no ':'"}, notIn: "secretword"},
		{name: "basic auth empty user", edit: func(c *rest.Config) { c.ClientBasicAuth = []string{":pw"} },
			wantErr: []string{"client-basic-auth[0]", "user name is empty"}},
		{name: "basic auth empty password", edit: func(c *rest.Config) { c.ClientBasicAuth = []string{"bob:"} },
			wantErr: []string{"client-basic-auth[0]", `user "bob"`, "empty password"}},
		{name: "negative timeout", edit: func(c *rest.Config) { c.WriteTimeout = -time.Second },
			wantErr: []string{"write-timeout", "-1s"}},
		{name: "negative header size", edit: func(c *rest.Config) { c.MaxHeaderBytes = -1 },
			wantErr: []string{"max-header-bytes", "-1"}},
		{name: "several errors at once", edit: func(c *rest.Config) { c.Endpoint = "x"; c.ServerKeyFile = "k" },
			wantErr: []string{"endpoint", "server-key-file"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := rest.DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if len(tc.wantErr) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			for _, want := range tc.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			if tc.notIn != "" {
				g.Expect(err.Error()).NotTo(ContainSubstring(tc.notIn), "passwords stay out of errors")
			}
		})
	}
}

func TestDefaultsAreSafe(t *testing.T) {
	g := NewWithT(t)
	c := rest.DefaultConfig()
	g.Expect(c.Endpoint).To(Equal("127.0.0.1:9999"), "loopback by default")
	g.Expect(c.ClientBasicAuth).To(BeEmpty(), "no default credentials")
	g.Expect(c.ReadHeaderTimeout).To(BeNumerically(">", 0))
	g.Expect(c.ShutdownTimeout).To(BeNumerically(">", 0))
}

// fromFile builds a plugin reading body as its http.conf, with the given
// command line.
func fromFile(t *testing.T, body string, args ...string) *rest.Plugin {
	t.Helper()
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "http.conf")
	g.Expect(os.WriteFile(path, []byte(body), 0o600)).To(Succeed())
	p := rest.NewPlugin(logTo(io.Discard, "info"), rest.UseDeps(func(d *rest.Deps) {
		d.Cfg = config.ForPlugin(rest.Name, config.WithPath(path))
	}))
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	p.RegisterFlags(fs)
	g.Expect(fs.Parse(args)).To(Succeed())
	return p
}

func TestInitConfigFile(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		args     []string
		wantErr  []string
		wantPort int
	}{
		{name: "endpoint from file", file: "endpoint: 127.0.0.1:8123\n", wantPort: 8123},
		{name: "empty file keeps defaults", file: "", wantPort: 9999},
		{name: "port flag replaces the port", file: "endpoint: 127.0.0.1:8123\n",
			args: []string{"-http-port", "8124"}, wantPort: 8124},
		{name: "bad port flag", file: "", args: []string{"-http-port", "99999"},
			wantErr: []string{"-http-port", "HTTP_PORT", `"99999"`}},
		{name: "unknown key", file: "endpiont: 127.0.0.1:1\n", wantErr: []string{`unknown key "endpiont"`, "http.conf"}},
		{name: "untagged spelling is unknown", file: "readtimeout: 5s\n", wantErr: []string{`"readtimeout"`}},
		{name: "duration without unit", file: "read-timeout: 5\n", wantErr: []string{"read-timeout", "invalid duration"}},
		{name: "invalid value names file and key", file: "server-cert-file: a.crt\n",
			wantErr: []string{"http.conf", "server-cert-file", "a.crt"}},
		{name: "missing cert file", file: "server-cert-file: /nonexistent/a.crt\nserver-key-file: /nonexistent/a.key\n",
			wantErr: []string{"/nonexistent/a.crt"}},
	}
	t.Setenv("HTTP_PORT", "") // empty counts as unset; guards against the caller's environment
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := fromFile(t, tc.file, tc.args...)
			err := p.Init()
			if len(tc.wantErr) > 0 {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tc.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.GetPort()).To(Equal(tc.wantPort))
			g.Expect(p.Close()).To(Succeed(), "Close without AfterInit")
		})
	}
}

// Not parallel: it sets an environment variable.
func TestPortFromEnv(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("HTTP_PORT", "8125")
	p := fromFile(t, "endpoint: 127.0.0.1:8123\n")
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.GetPort()).To(Equal(8125))

	p = fromFile(t, "endpoint: 127.0.0.1:8123\n", "-http-port", "8126")
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.GetPort()).To(Equal(8126), "the flag beats the environment")
}

func TestDisabled(t *testing.T) {
	g := NewWithT(t)
	c := loopback()
	c.Disabled = true
	p := rest.NewPlugin(rest.UseConf(c), logTo(io.Discard, "info"))
	p.RegisterHTTPHandler("/hello", hello)
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	g.Expect(p.Addr()).To(BeEmpty())
	g.Expect(p.GetPort()).To(BeZero())
	g.Expect(p.Close()).To(Succeed())
}

func TestSampleConfigDecodesToDefaults(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("HTTP_PORT", "")
	data, err := os.ReadFile("http.conf")
	g.Expect(err).NotTo(HaveOccurred())
	p := fromFile(t, string(data))
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.GetPort()).To(Equal(9999))
}

// Init warns about an endpoint on every interface and about basic auth
// over plain HTTP; the defaults warn about nothing.
func TestExposureWarnings(t *testing.T) {
	cases := []struct {
		name, endpoint string
		auth           []string
		tls            bool
		want           []string
	}{
		{"loopback", "127.0.0.1:0", nil, false, nil},
		{"IPv4 any", "0.0.0.0:0", nil, false, []string{"listens on all interfaces"}},
		{"IPv6 any", "[::]:0", nil, false, []string{"listens on all interfaces"}},
		{"empty host", ":0", nil, false, []string{"listens on all interfaces"}},
		{"basic auth over HTTP", "127.0.0.1:0", []string{"admin:secret"}, false, []string{"basic auth over plain HTTP"}},
		{"basic auth over HTTPS", "127.0.0.1:0", []string{"admin:secret"}, true, nil},
		{"both", "0.0.0.0:0", []string{"admin:secret"}, false,
			[]string{"listens on all interfaces", "basic auth over plain HTTP"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := rest.DefaultConfig()
			c.Endpoint, c.ClientBasicAuth = tc.endpoint, tc.auth
			if tc.tls {
				dir := t.TempDir()
				cert, key := newCA(t, "ca").issue(t, "agent", 2, x509.ExtKeyUsageServerAuth)
				c.ServerCertFile, c.ServerKeyFile = writeFile(t, dir, "s.crt", cert), writeFile(t, dir, "s.key", key)
			}
			out := &syncBuffer{}
			p := rest.NewPlugin(rest.UseConf(c), logTo(out, "info"))
			g.Expect(p.Init()).To(Succeed())
			g.Expect(p.Close()).To(Succeed())
			g.Expect(strings.Count(out.String(), "level=WARN")).To(Equal(len(tc.want)), out.String())
			for _, w := range tc.want {
				g.Expect(out.String()).To(ContainSubstring(w))
			}
			g.Expect(out.String()).NotTo(ContainSubstring("secret"), "no password in logs")
		})
	}
}

// UseDefaultEndpoint moves the default port (contiv-ksr's 9191); the file
// and the port flag still win over it.
func TestUseDefaultEndpoint(t *testing.T) {
	t.Setenv("HTTP_PORT", "")
	for _, tc := range []struct {
		name string
		file string
		args []string
		want int
	}{
		{name: "empty file", want: 9191},
		{name: "empty endpoint", file: "endpoint: \"\"\n", want: 9191},
		{name: "file wins", file: "endpoint: 127.0.0.1:8123\n", want: 8123},
		{name: "flag wins", args: []string{"-http-port", "8124"}, want: 8124},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "http.conf")
			g.Expect(os.WriteFile(path, []byte(tc.file), 0o600)).To(Succeed())
			p := rest.NewPlugin(logTo(io.Discard, "info"), rest.UseDefaultEndpoint("127.0.0.1:9191"),
				rest.UseDeps(func(d *rest.Deps) { d.Cfg = config.ForPlugin(rest.Name, config.WithPath(path)) }))
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			p.RegisterFlags(fs)
			g.Expect(fs.Parse(tc.args)).To(Succeed())
			g.Expect(p.Init()).To(Succeed())
			g.Expect(p.GetPort()).To(Equal(tc.want))
		})
	}
}
