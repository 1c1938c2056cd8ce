package health_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
)

func quiet(d *health.Deps) {
	d.LogRegistry = logging.NewRegistry(logging.WithOutput(io.Discard))
}

// newHealth builds a plugin with the default config and runs Init.
func newHealth(t *testing.T, opts ...health.Option) *health.Plugin {
	t.Helper()
	opts = append([]health.Option{health.UseConf(health.DefaultConfig()), health.UseDeps(quiet)}, opts...)
	p := health.NewPlugin(opts...)
	NewWithT(t).Expect(p.Init()).To(Succeed())
	t.Cleanup(func() { NewWithT(t).Expect(p.Close()).To(Succeed()) })
	return p
}

type report struct {
	plugin string
	state  health.State
	err    error
}

func TestWorstOfAggregation(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name     string
		nonFatal []string
		register []string
		reports  []report
		want     health.State
	}{
		{name: "nothing registered", want: health.OK},
		{name: "registered means init", register: []string{"a"}, want: health.Init},
		{name: "all ok", reports: []report{{"a", health.OK, nil}, {"b", health.OK, nil}}, want: health.OK},
		{name: "one init", reports: []report{{"a", health.OK, nil}, {"b", health.Init, nil}}, want: health.Init},
		{name: "error beats init", reports: []report{{"a", health.Error, boom}, {"b", health.Init, nil}}, want: health.Error},
		{name: "error reported first still counts", reports: []report{{"a", health.Error, boom}, {"b", health.OK, nil}},
			want: health.Error},
		{name: "last report of a plugin replaces its state",
			reports: []report{{"a", health.Error, boom}, {"a", health.OK, nil}}, want: health.OK},
		{name: "non-fatal error ignored", nonFatal: []string{"a"},
			reports: []report{{"a", health.Error, boom}, {"b", health.OK, nil}}, want: health.OK},
		{name: "non-fatal init ignored", nonFatal: []string{"a"}, register: []string{"a"}, want: health.OK},
		{name: "fatal error beside a non-fatal one", nonFatal: []string{"a"},
			reports: []report{{"a", health.Error, boom}, {"b", health.Error, boom}}, want: health.Error},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newHealth(t, health.WithNonFatalPlugins(tc.nonFatal...))
			for _, name := range tc.register {
				p.Register(name, nil)
			}
			for _, r := range tc.reports {
				p.ReportStateChange(r.plugin, r.state, r.err)
			}
			g.Expect(p.GetAgentStatus().State).To(Equal(tc.want))
		})
	}
}

func TestStatusContents(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func() { mu.Lock(); now = now.Add(time.Second); mu.Unlock() }
	p := newHealth(t, health.UseClock(clock), health.WithNonFatalPlugins("metrics"),
		health.UseBuildInfo(health.BuildInfo{Version: "v1.2.3", Date: "2025-01-01", Commit: "abc123"}))

	p.Register("ipam", nil)
	advance()
	p.ReportStateChange("ipam", health.Error, errors.New("pool exhausted"))
	advance()
	p.ReportStateChange("ipam", health.Error, errors.New("pool exhausted")) // same again: an update, no change
	p.Register("nodesync", nil)

	s := p.GetAgentStatus()
	g.Expect(s.State).To(Equal(health.Error))
	g.Expect(s.BuildInfo).To(Equal(health.BuildInfo{Version: "v1.2.3", Date: "2025-01-01", Commit: "abc123"}))
	g.Expect(s.NonFatal).To(Equal([]string{"metrics"}))
	g.Expect(s.StartTime).To(Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)))
	g.Expect(s.LastChange).To(Equal(s.StartTime.Add(time.Second)), "agent turned Error at the first report")
	g.Expect(s.Plugins).To(HaveLen(2))
	ipam := s.Plugins[0]
	g.Expect(ipam.Name).To(Equal("ipam"))
	g.Expect(ipam.Error).To(Equal("pool exhausted"))
	g.Expect(ipam.LastChange).To(Equal(s.StartTime.Add(time.Second)))
	g.Expect(ipam.LastUpdate).To(Equal(s.StartTime.Add(2 * time.Second)))
	g.Expect(s.Plugins[1].Name).To(Equal("nodesync"))
	g.Expect(s.Plugins[1].State).To(Equal(health.Init))
	g.Expect(p.GetAllPluginStatus()).To(Equal(s.Plugins))

	data, err := json.Marshal(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(And(ContainSubstring(`"state":"error"`), ContainSubstring(`"version":"v1.2.3"`)))
}

// switchable is a probe whose answer the test sets.
type switchable struct {
	mu    sync.Mutex
	state health.State
	err   error
	calls int
}

func (s *switchable) set(st health.State, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.err = st, err
}

func (s *switchable) probe() (health.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.state, s.err
}

func TestProbesApplied(t *testing.T) {
	g := NewWithT(t)
	p := newHealth(t)
	db := &switchable{state: health.OK}
	p.Register("db", db.probe)
	p.Register("quiet", nil)
	p.Register("panicky", func() (health.State, error) { panic("bug") })
	g.Expect(p.GetAgentStatus().State).To(Equal(health.Init), "registered, not probed yet")

	p.RunProbes()
	byName := func() map[string]health.PluginStatus {
		m := map[string]health.PluginStatus{}
		for _, s := range p.GetAllPluginStatus() {
			m[s.Name] = s
		}
		return m
	}
	g.Expect(byName()["db"].State).To(Equal(health.OK))
	g.Expect(byName()["quiet"].State).To(Equal(health.Init), "no probe, state unchanged")
	g.Expect(byName()["panicky"].State).To(Equal(health.Error))
	g.Expect(byName()["panicky"].Error).To(ContainSubstring("probe panicked: bug"))

	db.set(health.Error, errors.New("connection refused"))
	p.RunProbes()
	g.Expect(byName()["db"].State).To(Equal(health.Error))
	g.Expect(byName()["db"].Error).To(Equal("connection refused"))
}

func TestProbeLoop(t *testing.T) {
	g := NewWithT(t)
	p := health.NewPlugin(health.UseDeps(quiet), health.UseConf(health.Config{ProbeInterval: 10 * time.Millisecond}))
	g.Expect(p.Init()).To(Succeed())
	db := &switchable{state: health.OK}
	p.Register("db", db.probe)
	g.Expect(p.AfterInit()).To(Succeed())
	g.Eventually(func() health.State { return p.GetAgentStatus().State }).Should(Equal(health.OK))
	db.set(health.Error, errors.New("down"))
	g.Eventually(func() health.State { return p.GetAgentStatus().State }).Should(Equal(health.Error))
	db.set(health.OK, nil)
	g.Eventually(func() health.State { return p.GetAgentStatus().State }).Should(Equal(health.OK))

	g.Expect(p.Close()).To(Succeed())
	db.mu.Lock()
	calls := db.calls
	db.mu.Unlock()
	g.Consistently(func() int { db.mu.Lock(); defer db.mu.Unlock(); return db.calls }, "50ms", "10ms").
		Should(Equal(calls), "no probing after Close")
	g.Expect(p.Close()).To(Succeed(), "second Close")
}

func TestConfigFile(t *testing.T) {
	sample, err := os.ReadFile("health.conf")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cases := []struct {
		name, file string
		wantErr    []string
		nonFatal   []string
	}{
		{name: "shipped sample", file: string(sample)},
		{name: "non-fatal plugins", file: "non-fatal-plugins: [metrics, bolt]\n", nonFatal: []string{"bolt", "metrics"}},
		{name: "zero interval", file: "probe-interval: 0s\n", wantErr: []string{"health.conf", "probe-interval", `"0s"`}},
		{name: "negative interval", file: "probe-interval: -1s\n", wantErr: []string{"probe-interval", `"-1s"`}},
		{name: "empty plugin name", file: "non-fatal-plugins: ['']\n", wantErr: []string{"non-fatal-plugins[0]"}},
		{name: "unknown key", file: "probe_interval: 1s\n", wantErr: []string{`unknown key "probe_interval"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "health.conf")
			g.Expect(os.WriteFile(path, []byte(tc.file), 0o600)).To(Succeed())
			p := health.NewPlugin(health.UseDeps(func(d *health.Deps) {
				quiet(d)
				d.Cfg = config.ForPlugin(health.Name, config.WithPath(path))
			}))
			err := p.Init()
			defer func() { g.Expect(p.Close()).To(Succeed()) }()
			if len(tc.wantErr) > 0 {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tc.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.GetAgentStatus().NonFatal).To(Equal(tc.nonFatal))
		})
	}
}

// Readiness follows every fatal plugin; liveness only the plugins
// registered for it (the event loop): an etcd outage ("kvdb") leaves the
// agent live.
func TestLivenessAndReadiness(t *testing.T) {
	srv := resttest.New(t)
	p := newHealth(t, health.UseDeps(func(d *health.Deps) { d.HTTP = srv.Plugin }))
	p.RegisterLiveness("loop", nil)
	p.ReportStateChange("loop", health.OK, nil)
	cases := []struct {
		name                string
		plugin              string
		state               health.State
		liveness, readiness int
		agent, live         health.State
	}{
		{"kvdb init", "kvdb", health.Init, http.StatusOK, http.StatusServiceUnavailable, health.Init, health.OK},
		{"kvdb ok", "kvdb", health.OK, http.StatusOK, http.StatusOK, health.OK, health.OK},
		{"kvdb error: unready but live", "kvdb", health.Error, http.StatusOK, http.StatusServiceUnavailable, health.Error, health.OK},
		{"kvdb back to ok", "kvdb", health.OK, http.StatusOK, http.StatusOK, health.OK, health.OK},
		{"loop error: neither", "loop", health.Error, http.StatusServiceUnavailable, http.StatusServiceUnavailable, health.Error, health.Error},
		{"loop back to ok", "loop", health.OK, http.StatusOK, http.StatusOK, health.OK, health.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var err error
			if tc.state == health.Error {
				err = errors.New(tc.plugin + " broken")
			}
			p.ReportStateChange(tc.plugin, tc.state, err)
			for _, probe := range []struct {
				path string
				want int
			}{{"/liveness", tc.liveness}, {"/readiness", tc.readiness}} {
				status, body := srv.Get(probe.path)
				g.Expect(status).To(Equal(probe.want), probe.path)
				var got health.AgentStatus
				g.Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
				g.Expect(got.State).To(Equal(tc.agent))
				g.Expect(got.Live).To(Equal(tc.live))
				g.Expect(got.Plugins).To(HaveLen(2))
				g.Expect(got.Plugins[1].Name).To(Equal("loop"))
				g.Expect(got.Plugins[1].Liveness).To(BeTrue())
				g.Expect(got.Plugins[0].Liveness).To(BeFalse())
				if err != nil {
					g.Expect(body).To(ContainSubstring(`"error": "` + tc.plugin + ` broken"`))
				}
			}
		})
	}
}

// A liveness plugin named non-fatal counts for neither probe.
func TestNonFatalLivenessPluginIsIgnored(t *testing.T) {
	g := NewWithT(t)
	p := newHealth(t, health.WithNonFatalPlugins("loop"))
	p.RegisterLiveness("loop", func() (health.State, error) { return health.Error, errors.New("stuck") })
	p.RunProbes()
	s := p.GetAgentStatus()
	g.Expect(s.Live).To(Equal(health.OK))
	g.Expect(s.State).To(Equal(health.OK))
	g.Expect(s.Plugins[0].Error).To(Equal("stuck"))
}

func TestStateText(t *testing.T) {
	g := NewWithT(t)
	for _, st := range []health.State{health.OK, health.Init, health.Error} {
		text, err := st.MarshalText()
		g.Expect(err).NotTo(HaveOccurred())
		var back health.State
		g.Expect(back.UnmarshalText(text)).To(Succeed())
		g.Expect(back).To(Equal(st))
	}
	var s health.State
	g.Expect(s.UnmarshalText([]byte("broken"))).To(MatchError(ContainSubstring(`"broken"`)))
}

// With client authentication on, the REST server serves the probes to a
// client without credentials (the kubelet), and the plugin answers it the
// two states only: no plugin, error or build. An authenticated client gets
// the whole status; every other path still needs credentials.
func TestProbesUnderClientAuthentication(t *testing.T) {
	pki := resttest.NewPKI(t)
	basic := resttest.Config()
	basic.ClientBasicAuth = []string{"admin:s3cret"}
	cases := []struct {
		name              string
		conf              rest.Config
		anonymous, authed func(*resttest.Server) *resttest.Server
		authHeader        http.Header
		refused           int
	}{
		{name: "basic auth", conf: basic,
			anonymous:  func(s *resttest.Server) *resttest.Server { return s },
			authed:     func(s *resttest.Server) *resttest.Server { return s },
			authHeader: resttest.BasicAuth("admin", "s3cret"), refused: http.StatusUnauthorized},
		{name: "client certificates", conf: pki.MutualTLS(resttest.Config()),
			anonymous: func(s *resttest.Server) *resttest.Server { return s.WithClient(pki.Client("")) },
			authed:    func(s *resttest.Server) *resttest.Server { return s.WithClient(pki.Client("ops")) },
			refused:   http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := resttest.New(t, rest.UseConf(tc.conf))
			p := newHealth(t, health.UseBuildInfo(health.BuildInfo{Version: "v9.9.9"}),
				health.UseDeps(func(d *health.Deps) { d.HTTP = srv.Plugin }))
			p.ReportStateChange("kvdb", health.Error, errors.New("dial tcp 10.0.0.5:2379: refused"))
			anonymous, authed := tc.anonymous(srv), tc.authed(srv)
			for _, probe := range []struct {
				path string
				want int
			}{{health.LivenessPath, http.StatusOK}, {health.ReadinessPath, http.StatusServiceUnavailable}} {
				status, body := anonymous.Get(probe.path)
				g.Expect(status).To(Equal(probe.want), probe.path)
				g.Expect(body).To(MatchJSON(`{"state": "error", "live": "ok"}`), probe.path)

				status, body = authed.Do(http.MethodGet, probe.path, "", tc.authHeader)
				g.Expect(status).To(Equal(probe.want), probe.path)
				g.Expect(body).To(And(ContainSubstring("10.0.0.5:2379"), ContainSubstring("v9.9.9")), probe.path)
			}
			status, _ := anonymous.Get("/")
			g.Expect(status).To(Equal(tc.refused), "the index still needs credentials")
		})
	}
}
