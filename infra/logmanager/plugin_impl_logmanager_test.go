package logmanager_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/logging/logtest"
	"github.com/contiv-ipam/agent/infra/logmanager"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer = logtest.Buffer

// served builds a logmanager on reg behind a real REST server and runs Init.
func served(t *testing.T, reg *logging.Registry, opts ...logmanager.Option) *resttest.Server {
	t.Helper()
	srv := resttest.New(t)
	opts = append([]logmanager.Option{
		logmanager.UseConf(logmanager.DefaultConfig()),
		logmanager.UseDeps(func(d *logmanager.Deps) {
			d.LogRegistry = reg
			d.HTTP = srv.Plugin
		}),
	}, opts...)
	p := logmanager.NewPlugin(opts...)
	NewWithT(t).Expect(p.Init()).To(Succeed())
	t.Cleanup(func() { NewWithT(t).Expect(p.Close()).To(Succeed()) })
	return srv
}

func TestLevelSetOverRESTBeforeLoggerExists(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(logging.EnvInitialLevel, "")
	out := &syncBuffer{}
	reg := logging.NewRegistry(logging.WithOutput(out))
	srv := served(t, reg)

	status, body := srv.Put("/log/ipam.later/debug", "")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{"logger": "ipam.later", "level": "debug"}`))
	g.Expect(reg.ListLoggers()).NotTo(HaveKey("ipam.later"), "not created by the PUT")

	reg.Logger("ipam.later").Debug("visible at debug")
	reg.Logger("other").Debug("hidden at info")
	g.Expect(out.String()).To(ContainSubstring("visible at debug"))
	g.Expect(out.String()).NotTo(ContainSubstring("hidden at info"))
	g.Expect(reg.ListLoggers()).To(HaveKeyWithValue("ipam.later", "debug"))
	g.Expect(reg.ListLoggers()).To(HaveKeyWithValue("other", "info"))
}

// PUT /log/{logger}/{level} for loggers that do not exist is bounded: past
// logging.MaxRememberedLevels names it answers 400 naming the logger and
// the limit; existing loggers still change.
func TestRememberedLevelsOverRESTAreBounded(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(logging.EnvInitialLevel, "")
	reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
	reg.Logger("ipam")
	srv := served(t, reg)
	for i := range logging.MaxRememberedLevels {
		status, body := srv.Put(fmt.Sprintf("/log/nobody-%d/debug", i), "")
		g.Expect(status).To(Equal(http.StatusOK), body)
	}
	status, body := srv.Put("/log/nobody-else/debug", "")
	g.Expect(status).To(Equal(http.StatusBadRequest))
	g.Expect(body).To(ContainSubstring(`"error": "logger \"nobody-else\": no such logger yet, and ` +
		`too many levels remembered for loggers that do not exist yet (limit 256)`))
	status, _ = srv.Put("/log/ipam/debug", "")
	g.Expect(status).To(Equal(http.StatusOK), "an existing logger")
}

func TestListAndSet(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(logging.EnvInitialLevel, "")
	reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
	reg.Logger("zeta")
	reg.Logger("alpha")
	srv := served(t, reg)

	status, body := srv.Put("/log/zeta/WARNING", "")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`{"logger": "zeta", "level": "warn"}`), "level echoed by its canonical name")

	status, body = srv.Get("/log/list")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(MatchJSON(`[
		{"logger": "alpha", "level": "info"},
		{"logger": "logmanager", "level": "info"},
		{"logger": "zeta", "level": "warn"}
	]`))

	status, _ = srv.Put("/log/default/error", "")
	g.Expect(status).To(Equal(http.StatusOK))
	reg.Logger("created-later")
	g.Expect(reg.ListLoggers()).To(HaveKeyWithValue("created-later", "error"), `"default" sets future loggers`)
	g.Expect(reg.ListLoggers()).To(HaveKeyWithValue("alpha", "info"), `"default" leaves existing loggers alone`)

	status, body = srv.Get("/")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(And(ContainSubstring(`"/log/list"`), ContainSubstring(`"/log/{logger}/{level}"`)))
}

func TestSetErrors(t *testing.T) {
	t.Setenv(logging.EnvInitialLevel, "")
	reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
	reg.Logger("a")
	srv := served(t, reg)
	cases := []struct {
		name, method, path string
		status             int
		body               string
	}{
		{"unknown level", http.MethodPut, "/log/a/loud", http.StatusBadRequest, `unknown log level \"loud\"`},
		{"invalid logger name", http.MethodPut, "/log/a%20b/debug", http.StatusBadRequest, `invalid logger name \"a b\"`},
		{"GET is not allowed", http.MethodGet, "/log/a/debug", http.StatusMethodNotAllowed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, body := srv.Do(tc.method, tc.path, "", nil)
			g.Expect(status).To(Equal(tc.status))
			if tc.body != "" {
				g.Expect(body).To(ContainSubstring(`"error"`))
				g.Expect(body).To(ContainSubstring(tc.body))
			}
		})
	}
	NewWithT(t).Expect(reg.ListLoggers()).To(HaveKeyWithValue("a", "info"), "a failed PUT changes nothing")
}

// fromFile runs Init with body as logmanager.conf on reg.
func fromFile(t *testing.T, reg *logging.Registry, body string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "logmanager.conf")
	NewWithT(t).Expect(os.WriteFile(path, []byte(body), 0o600)).To(Succeed())
	p := logmanager.NewPlugin(logmanager.UseDeps(func(d *logmanager.Deps) {
		d.LogRegistry = reg
		d.Cfg = config.ForPlugin(logmanager.Name, config.WithPath(path))
	}))
	return p.Init()
}

func TestConfigFile(t *testing.T) {
	t.Setenv(logging.EnvInitialLevel, "")
	cases := []struct {
		name    string
		file    string
		wantErr []string
		want    map[string]string // after creating "existing", "named" and "fresh"
	}{
		{name: "empty file changes nothing", file: "",
			want: map[string]string{"existing": "info", "named": "info", "fresh": "info"}},
		{name: "default level and a logger created later", file: "default-level: warn\nloggers:\n  - {name: named, level: trace}\n",
			want: map[string]string{"existing": "warn", "named": "trace", "fresh": "warn"}},
		{name: "logger entry beats default", file: "default-level: error\nloggers: [{name: existing, level: debug}]\n",
			want: map[string]string{"existing": "debug", "named": "error", "fresh": "error"}},
		{name: "bad logger level", file: "loggers: [{name: ipam, level: verbose}]\n",
			wantErr: []string{"loggers[0]", `"ipam"`, `"verbose"`, "logmanager.conf"}},
		{name: "bad default level", file: "default-level: loud\n", wantErr: []string{"default-level", `"loud"`}},
		{name: "logger without name", file: "loggers: [{level: debug}]\n", wantErr: []string{"loggers[0]", "empty name"}},
		{name: "invalid logger name", file: "loggers: [{name: 'a b', level: debug}]\n",
			wantErr: []string{`logger "a b"`, `level "debug"`}},
		{name: "unknown key", file: "default_level: info\n", wantErr: []string{`unknown key "default_level"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
			reg.Logger("existing")
			err := fromFile(t, reg, tc.file)
			if len(tc.wantErr) > 0 {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tc.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			reg.Logger("named")
			reg.Logger("fresh")
			got := reg.ListLoggers()
			for name, lvl := range tc.want {
				g.Expect(got).To(HaveKeyWithValue(name, lvl))
			}
		})
	}
}

// Not parallel: sets INITIAL_LOGLVL.
func TestInitialLogLevelWins(t *testing.T) {
	cases := []struct {
		name, env, file string
		wantErr         string
		want            string
	}{
		{name: "env beats default-level", env: "error", file: "default-level: debug\n", want: "error"},
		{name: "env without default-level", env: "debug", file: "", want: "debug"},
		{name: "default-level without env", env: "", file: "default-level: warn\n", want: "warn"},
		{name: "bad env value", env: "chatty", file: "default-level: debug\n", wantErr: `env INITIAL_LOGLVL: unknown log level "chatty"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv(logging.EnvInitialLevel, tc.env)
			reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
			reg.Logger("existing")
			err := fromFile(t, reg, tc.file)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(reg.ListLoggers()).To(HaveKeyWithValue("existing", tc.want))
			g.Expect(reg.GetLevel(logging.DefaultName)).To(Equal(tc.want))
		})
	}
}

func TestWithoutHTTP(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(logging.EnvInitialLevel, "")
	reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
	p := logmanager.NewPlugin(
		logmanager.UseConf(logmanager.Config{Loggers: []logmanager.LoggerConfig{{Name: "x", Level: "debug"}}}),
		logmanager.UseDeps(func(d *logmanager.Deps) { d.LogRegistry = reg }))
	g.Expect(p.Init()).To(Succeed())
	got, err := p.SetLevel("y", "trace")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(logmanager.LoggerLevel{Logger: "y", Level: "trace"}))
	reg.Logger("x")
	g.Expect(p.ListLoggers()).To(ContainElement(logmanager.LoggerLevel{Logger: "x", Level: "debug"}))
	g.Expect(p.Close()).To(Succeed())
}

func TestSampleConfigDecodes(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(logging.EnvInitialLevel, "")
	data, err := os.ReadFile("logmanager.conf")
	g.Expect(err).NotTo(HaveOccurred())
	reg := logging.NewRegistry(logging.WithOutput(&syncBuffer{}))
	g.Expect(fromFile(t, reg, string(data))).To(Succeed())
}
