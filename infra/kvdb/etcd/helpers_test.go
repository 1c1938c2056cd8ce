package etcd

import (
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/logging/logtest"
)

func noEnv(string) (string, bool) { return "", false }

// syncBuffer is a bytes.Buffer safe for concurrent writers (log output).
type syncBuffer = logtest.Buffer

// testLogger sends the plugin's logs to the test output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fastConfig is a config with short timeouts for tests.
func fastConfig(endpoints ...string) Config {
	cfg := DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.DialTimeout = 300 * time.Millisecond
	cfg.OperationTimeout = 3 * time.Second
	cfg.ReconnectInterval = 100 * time.Millisecond
	cfg.ProbeInterval = 100 * time.Millisecond
	return cfg
}

// newPlugin builds a plugin on cfg with no config file and no env.
func newPlugin(t testing.TB, cfg Config, rep health.Reporter) *Plugin {
	return NewPlugin(UseConf(cfg), UseEnv(noEnv), UseDeps(func(d *Deps) {
		d.Cfg = config.NoFile
		d.Log = testLogger(t)
		if rep != nil {
			d.StatusCheck = rep
		}
	}))
}

// startPlugin builds a plugin, runs Init and AfterInit and closes it at cleanup.
func startPlugin(t testing.TB, cfg Config, rep health.Reporter) *Plugin {
	t.Helper()
	p := newPlugin(t, cfg, rep)
	if err := p.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.AfterInit(); err != nil {
		t.Fatalf("AfterInit: %v", err)
	}
	return p
}

// freePort returns a loopback port that nothing listens on right now.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fakeReporter records health registrations and reports.
type fakeReporter struct {
	mu      sync.Mutex
	probes  map[string]health.Probe
	reports []health.State
}

func (f *fakeReporter) Register(name string, probe health.Probe) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.probes == nil {
		f.probes = map[string]health.Probe{}
	}
	f.probes[name] = probe
}

func (f *fakeReporter) ReportStateChange(_ string, state health.State, _ error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, state)
}

// last returns the last reported state (Init before any report).
func (f *fakeReporter) last() health.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reports) == 0 {
		return health.Init
	}
	return f.reports[len(f.reports)-1]
}

// probe polls the registered probe like the health plugin would.
func (f *fakeReporter) probe(g Gomega, name string) health.State {
	f.mu.Lock()
	probe := f.probes[name]
	f.mu.Unlock()
	g.Expect(probe).NotTo(BeNil(), "probe of %s registered", name)
	state, _ := probe()
	return state
}
