package bolt

import (
	"github.com/contiv-ipam/agent/infra/config"
	"log/slog"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// testLogger sends the plugin's logs to the test output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testConfig is the default config with the file in a fresh temp dir.
func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.DBPath = filepath.Join(t.TempDir(), "sub", "bolt.db")
	cfg.LockTimeout = 100e6 // 100ms
	return cfg
}

// newPlugin builds a plugin on cfg without a config file.
func newPlugin(t testing.TB, cfg Config) *Plugin {
	return NewPlugin(UseConf(cfg), UseDeps(func(d *Deps) {
		d.Cfg = config.NoFile
		d.Log = testLogger(t)
	}))
}

// openPlugin builds and initialises a plugin on cfg, closed at cleanup.
func openPlugin(t testing.TB, cfg Config) *Plugin {
	p := newPlugin(t, cfg)
	if err := p.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { NewWithT(t).Expect(p.Close()).To(Succeed()) })
	return p
}
