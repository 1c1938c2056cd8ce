package etcd

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

// fileConfig is the real config accessor reading path, without env.
func fileConfig(path string) *config.FileConfig {
	return config.ForPlugin("etcd", config.WithPath(path), config.WithEnv(noEnv))
}

func TestNormalizeEndpoints(t *testing.T) {
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == EnvEndpoints }
	}
	cases := []struct {
		name         string
		file         []string
		embedded     bool
		env          func(string) (string, bool)
		want         []string
		wantEmbedded bool
	}{
		{"file wins over env", []string{"a:1"}, false, env("b:2"), []string{"a:1"}, false},
		{"env when the file has none", nil, false, env("b:2, c:3,"), []string{"b:2", "c:3"}, false},
		{"nothing means embedded", nil, false, noEnv, nil, true},
		{"blank entries mean none", []string{" ", ""}, false, env(" , "), nil, true},
		{"embedded ignores env", nil, true, env("b:2"), nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := DefaultConfig()
			cfg.Endpoints, cfg.Embedded = tc.file, tc.embedded
			cfg.Normalize(tc.env)
			g.Expect(cfg.Endpoints).To(Equal(tc.want))
			g.Expect(cfg.Embedded).To(Equal(tc.wantEmbedded))
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		change  func(c *Config)
		wantErr string
	}{
		{"defaults are valid (embedded)", func(c *Config) {}, ""},
		{"endpoints are valid", func(c *Config) { c.Endpoints = []string{"10.0.0.1:2379", "https://etcd.example:2379"} }, ""},
		{"bad endpoint", func(c *Config) { c.Endpoints = []string{"etcd-without-port"} }, `endpoints: "etcd-without-port"`},
		{"bad endpoint port", func(c *Config) { c.Endpoints = []string{"h:99999"} }, `invalid port "99999"`},
		{"bad endpoint scheme", func(c *Config) { c.Endpoints = []string{"ftp://h:1"} }, `"ftp://h:1"`},
		{"zero dial timeout", func(c *Config) { c.DialTimeout = 0 }, "dial-timeout: 0s"},
		{"negative operation timeout", func(c *Config) { c.OperationTimeout = -time.Second }, "operation-timeout: -1s"},
		{"zero reconnect interval", func(c *Config) { c.ReconnectInterval = 0 }, "reconnect-interval: 0s"},
		{"zero probe interval", func(c *Config) { c.ProbeInterval = 0 }, "probe-interval: 0s"},
		{"short session ttl", func(c *Config) { c.SessionTTL = 500 * time.Millisecond }, "session-ttl: 500ms"},
		{"negative auto-compact", func(c *Config) { c.AutoCompact = -time.Minute }, "auto-compact: -1m0s"},
		{"cert without key", func(c *Config) { c.Endpoints = []string{"h:1"}; c.CertFile = "c.pem" }, `key-file ""`},
		{"embedded with endpoints", func(c *Config) { c.Embedded = true; c.Endpoints = []string{"h:1"} }, "conflicts with endpoints"},
		{"embedded on all interfaces", func(c *Config) { c.EmbeddedClientURL = "http://0.0.0.0:2379" }, `embedded-client-url: URL "http://0.0.0.0:2379"`},
		{"embedded peer off-host", func(c *Config) { c.EmbeddedPeerURL = "http://10.1.1.1:2380" }, "embedded-peer-url"},
		{"embedded same URLs", func(c *Config) { c.EmbeddedPeerURL = c.EmbeddedClientURL }, "both are"},
		{"embedded without dir", func(c *Config) { c.EmbeddedDataDir = "" }, "embedded-data-dir"},
		{"embedded with TLS", func(c *Config) { c.CAFile = "ca.pem" }, "not used with the embedded server"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := DefaultConfig()
			tc.change(&cfg)
			cfg.Normalize(noEnv)
			err := cfg.Validate()
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestConfigFileIsStrict(t *testing.T) {
	g := NewWithT(t)
	conf := filepath.Join(t.TempDir(), "etcd.conf")
	g.Expect(os.WriteFile(conf, []byte("endpoint: 127.0.0.1:2379\n"), 0o600)).To(Succeed())
	p := NewPlugin(UseEnv(noEnv), UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	err := p.Init()
	g.Expect(err).To(MatchError(ContainSubstring(`unknown key "endpoint"`)))
	g.Expect(err).To(MatchError(ContainSubstring(conf)))
	g.Expect(p.Close()).To(Succeed())
}

func TestConfigFileDurations(t *testing.T) {
	g := NewWithT(t)
	conf := filepath.Join(t.TempDir(), "etcd.conf")
	body := "endpoints: [127.0.0.1:1, 'http://127.0.0.1:2']\ndial-timeout: 250ms\nresync-after-reconnect: false\n"
	g.Expect(os.WriteFile(conf, []byte(body), 0o600)).To(Succeed())
	p := NewPlugin(UseEnv(noEnv), UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	cfg, err := p.loadConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Endpoints).To(Equal([]string{"127.0.0.1:1", "http://127.0.0.1:2"}))
	g.Expect(cfg.DialTimeout).To(Equal(250 * time.Millisecond))
	g.Expect(cfg.ResyncAfterReconnect).To(BeFalse())
	g.Expect(cfg.OperationTimeout).To(Equal(3*time.Second), "unset keys keep defaults")
	g.Expect(cfg.Embedded).To(BeFalse())
}

func TestTLSConfig(t *testing.T) {
	cases := []struct {
		name    string
		change  func(c *Config)
		wantTLS bool
		wantErr string
	}{
		{"plain by default", func(c *Config) {}, false, ""},
		{"https endpoint", func(c *Config) { c.Endpoints = []string{"https://h:1"} }, true, ""},
		{"skip verify", func(c *Config) { c.InsecureSkipTLSVerify = true }, true, ""},
		{"insecure transport wins", func(c *Config) { c.InsecureTransport = true; c.CAFile = "ca.pem" }, false, ""},
		{"missing CA file", func(c *Config) { c.CAFile = "/nonexistent/ca.pem" }, false, "/nonexistent/ca.pem"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := DefaultConfig()
			cfg.Endpoints = []string{"h:1"}
			tc.change(&cfg)
			tc2, err := cfg.tlsConfig()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tc2 != nil).To(Equal(tc.wantTLS))
			if tc2 != nil {
				g.Expect(tc2.InsecureSkipVerify).To(Equal(cfg.InsecureSkipTLSVerify))
			}
		})
	}
}
