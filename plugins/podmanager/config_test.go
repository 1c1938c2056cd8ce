package podmanager

import (
	"net"
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
		{"one connection", func(c *Config) { c.MaxConnections = 1 }, ""},
		{"zero connections", func(c *Config) { c.MaxConnections = 0 }, "maxConnections 0: want at least 1"},
		{"negative connections", func(c *Config) { c.MaxConnections = -5 }, "maxConnections -5: want at least 1"},
		{"short handshake", func(c *Config) { c.HandshakeTimeout = time.Millisecond }, ""},
		{"zero handshake", func(c *Config) { c.HandshakeTimeout = 0 }, "handshakeTimeout 0s: want a positive duration"},
		{"negative handshake", func(c *Config) { c.HandshakeTimeout = -time.Second }, "handshakeTimeout -1s: want a positive duration"},
		{"short idle", func(c *Config) { c.IdleTimeout = time.Second }, ""},
		{"zero idle", func(c *Config) { c.IdleTimeout = 0 }, "idleTimeout 0s: want a positive duration"},
		{"negative idle", func(c *Config) { c.IdleTimeout = -time.Minute }, "idleTimeout -1m0s: want a positive duration"},
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

func TestConfigValidateNamesEveryBadKey(t *testing.T) {
	g := NewWithT(t)
	c := Config{SocketPath: "/run/cni.sock"}
	err := c.Validate()
	g.Expect(err).To(MatchError(And(
		ContainSubstring("requestTimeout 0s"), ContainSubstring("maxConnections 0"),
		ContainSubstring("handshakeTimeout 0s"), ContainSubstring("idleTimeout 0s"))))
}

func TestDefaultConfigBoundsTheSocket(t *testing.T) {
	g := NewWithT(t)
	c := DefaultConfig()
	g.Expect(c.MaxConnections).To(Equal(1024))
	g.Expect(c.HandshakeTimeout).To(Equal(time.Second))
	g.Expect(c.IdleTimeout).To(Equal(2 * time.Minute))
	g.Expect(c.Validate()).To(Succeed())
}

func TestConfigFile(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    Config
		err     []string
	}{
		{"keys", "socketPath: /tmp/x/cni.sock\nrequestTimeout: 3s\nmaxConnections: 64\nhandshakeTimeout: 500ms\nidleTimeout: 30s\n" +
			"criSocket: unix:///run/containerd/containerd.sock\ncriTimeout: 1s\ncriListPeriod: 5s\ncriGCPeriod: 0s\n",
			Config{SocketPath: "/tmp/x/cni.sock", RequestTimeout: 3 * time.Second,
				MaxConnections: 64, HandshakeTimeout: 500 * time.Millisecond, IdleTimeout: 30 * time.Second,
				CRISocket: "unix:///run/containerd/containerd.sock", CRITimeout: time.Second, CRIListPeriod: 5 * time.Second}, nil},
		{"defaults fill the rest", "requestTimeout: 1s\n",
			Config{SocketPath: DefaultSocketPath, RequestTimeout: time.Second,
				MaxConnections: 1024, HandshakeTimeout: time.Second, IdleTimeout: 2 * time.Minute,
				CRITimeout: 2 * time.Second, CRIListPeriod: 10 * time.Second, CRIGCPeriod: 5 * time.Minute}, nil},
		{"bad runtime keys", "criSocket: tcp://127.0.0.1:1\ncriTimeout: 0s\ncriListPeriod: -1s\ncriGCPeriod: -1s\n", Config{},
			[]string{`criSocket "tcp://127.0.0.1:1": want a unix socket`, "criTimeout 0s", "criListPeriod -1s", "criGCPeriod -1s"}},
		{"relative runtime socket", "criSocket: run/containerd.sock\n", Config{},
			[]string{`criSocket "run/containerd.sock": want an absolute path`}},
		{"unknown key", "socketPath: /tmp/x.sock\nsocketMode: \"0666\"\n", Config{}, []string{`"socketMode"`}},
		{"bad value", "requestTimeout: 0s\n", Config{}, []string{"requestTimeout 0s"}},
		{"bad bounds", "maxConnections: 0\nhandshakeTimeout: -1s\nidleTimeout: 0s\n", Config{},
			[]string{"maxConnections 0: want at least 1", "handshakeTimeout -1s", "idleTimeout 0s"}},
		{"not a duration", "handshakeTimeout: 5\n", Config{}, []string{"handshakeTimeout"}},
		{"not a number", "maxConnections: many\n", Config{}, []string{"maxConnections"}},
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

// TestLoadConfigLooksAtTheSocket: the socket path is
// looked at before any plugin's Init; a stale socket is left for AfterInit.
func TestLoadConfigLooksAtTheSocket(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = ln.Close() }()
	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	g.Expect(err).NotTo(HaveOccurred())
	sl.SetUnlinkOnClose(false)
	g.Expect(sl.Close()).To(Succeed())
	file := filepath.Join(dir, "file")
	g.Expect(os.WriteFile(file, nil, 0o600)).To(Succeed())

	load := func(path string) error {
		c := DefaultConfig()
		c.SocketPath = path
		return NewPlugin(UseConf(c)).LoadConfig()
	}
	g.Expect(load(live)).To(MatchError(ErrSocketInUse))
	g.Expect(load(file)).To(MatchError(ErrNotSocket))
	g.Expect(load(stale)).To(Succeed())
	g.Expect(load(filepath.Join(dir, "absent", "cni.sock"))).To(Succeed())
	_, err = os.Lstat(stale)
	g.Expect(err).NotTo(HaveOccurred(), "LoadConfig removes nothing")
	_, err = os.Stat(filepath.Join(dir, "absent"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "LoadConfig creates nothing")
}
