package bolt

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
)

func TestSampleConfigIsTheDefault(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("bolt.conf")
	g.Expect(err).NotTo(HaveOccurred())
	var cfg Config
	g.Expect(config.Decode(data, &cfg, "bolt.conf")).To(Succeed())
	g.Expect(cfg).To(Equal(DefaultConfig()), "every key documented, with its default")
	g.Expect(cfg.Validate()).To(Succeed())
}

func TestFileMode(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       FileMode
		wantErr    string
	}{
		{name: "quoted octal", yaml: `file-mode: "0640"`, want: 0o640},
		{name: "quoted 0o octal", yaml: `file-mode: "0o660"`, want: 0o660},
		{name: "YAML octal number", yaml: `file-mode: 0640`, want: 0o640},
		{name: "decimal number", yaml: `file-mode: 432`, want: 0o660},
		{name: "not octal", yaml: `file-mode: "0689"`, wantErr: `"0689"`},
		{name: "words", yaml: `file-mode: "rw-r--r--"`, wantErr: `"rw-r--r--"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := DefaultConfig()
			err := config.Decode([]byte(tc.yaml), &cfg, "bolt.conf")
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.FileMode).To(Equal(tc.want))
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		change  func(c *Config)
		wantErr string
	}{
		{"empty path", func(c *Config) { c.DBPath = " " }, "db-path: must not be empty"},
		{"mode too big", func(c *Config) { c.FileMode = 0o1777 }, "file-mode: 1777"},
		{"owner cannot write", func(c *Config) { c.FileMode = 0o400 }, "file-mode: 0400"},
		{"negative lock timeout", func(c *Config) { c.LockTimeout = -1e9 }, "lock-timeout: -1s"},
		{"zero batch", func(c *Config) { c.MaxBatchSize = 0 }, "max-batch-size: 0"},
		{"negative history", func(c *Config) { c.WatchHistory = -1 }, "watch-history: -1"},
		{"zero buffer", func(c *Config) { c.WatchBuffer = 0 }, "watch-buffer: 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := DefaultConfig()
			tc.change(&cfg)
			g.Expect(cfg.Validate()).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

// fileConfig is the real config accessor reading path, without env.
func fileConfig(path string) *config.FileConfig {
	return config.ForPlugin("bolt", config.WithPath(path),
		config.WithEnv(func(string) (string, bool) { return "", false }))
}

func TestInitReadsConfigFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "deep", "er", "my.db")
	conf := filepath.Join(dir, "bolt.conf")
	g.Expect(os.WriteFile(conf, []byte("db-path: "+dbPath+"\nfile-mode: \"0640\"\n"), 0o600)).To(Succeed())
	p := NewPlugin(UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	g.Expect(p.Init()).To(Succeed())
	t.Cleanup(func() { _ = p.Close() })
	g.Expect(p.Config().DBPath).To(Equal(dbPath))
	g.Expect(p.Config().LockTimeout).To(Equal(DefaultConfig().LockTimeout), "unset keys keep defaults")
	st, err := os.Stat(dbPath)
	g.Expect(err).NotTo(HaveOccurred(), "parent directories are created")
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o640)))
}

func TestInitRejectsUnknownKey(t *testing.T) {
	g := NewWithT(t)
	conf := filepath.Join(t.TempDir(), "bolt.conf")
	g.Expect(os.WriteFile(conf, []byte("db-path: /tmp/x.db\nlock-timout: 1s\n"), 0o600)).To(Succeed())
	p := NewPlugin(UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	err := p.Init()
	g.Expect(err).To(MatchError(ContainSubstring(`unknown key "lock-timout"`)))
	g.Expect(err).To(MatchError(ContainSubstring(conf)))
}

func TestMissingFileMeansDefaults(t *testing.T) {
	g := NewWithT(t)
	t.Chdir(t.TempDir()) // no bolt.conf here
	base := testConfig(t)
	p := NewPlugin(UseConf(base), UseDeps(func(d *Deps) {
		d.Cfg = config.ForPlugin("bolt", config.WithEnv(func(string) (string, bool) { return "", false }))
		d.Log = testLogger(t)
	}))
	g.Expect(p.Init()).To(Succeed(), "not disabled: a missing file means defaults")
	t.Cleanup(func() { _ = p.Close() })
	g.Expect(p.Config()).To(Equal(base))
	g.Expect(p.Put(t.Context(), "k", nil)).To(Succeed())
}
