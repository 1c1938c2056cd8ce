package podmanager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *Config)
		want   string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"relative path", func(c *Config) { c.SocketPath = "_data/cni.sock" }, ""},
		{"empty path", func(c *Config) { c.SocketPath = "" }, `socketPath ""`},
		{"too long", func(c *Config) { c.SocketPath = "/" + strings.Repeat("a", 107) }, "108 bytes, a unix socket path has at most 107"},
		{"directory", func(c *Config) { c.SocketPath = "/var/run/" }, `socketPath "/var/run/": want a file name`},
		{"zero timeout", func(c *Config) { c.RequestTimeout = 0 }, "requestTimeout 0s: want a positive duration"},
		{"negative timeout", func(c *Config) { c.RequestTimeout = -time.Second }, "requestTimeout -1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := DefaultConfig()
			tc.change(&c)
			err := c.Validate()
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestConfigFile(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    Config
		err     []string
	}{
		{"keys", "socketPath: /tmp/x/cni.sock\nrequestTimeout: 3s\n",
			Config{SocketPath: "/tmp/x/cni.sock", RequestTimeout: 3 * time.Second}, nil},
		{"defaults fill the rest", "requestTimeout: 1s\n",
			Config{SocketPath: DefaultSocketPath, RequestTimeout: time.Second}, nil},
		{"unknown key", "socketPath: /tmp/x.sock\nsocketMode: \"0666\"\n", Config{}, []string{`"socketMode"`}},
		{"bad value", "requestTimeout: 0s\n", Config{}, []string{"requestTimeout 0s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "podmanager.conf")
			g.Expect(os.WriteFile(path, []byte(tc.content), 0o600)).To(Succeed())
			p := NewPlugin(UseDeps(func(d *Deps) { d.Cfg = config.ForPlugin(Name, config.WithPath(path)) }))
			err := p.LoadConfig()
			if tc.err != nil {
				g.Expect(err).To(MatchError(ContainSubstring(path)))
				for _, want := range tc.err {
					g.Expect(err).To(MatchError(ContainSubstring(want)))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			got, err := p.loadConfig()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
