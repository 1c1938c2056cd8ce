package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
)

func quiet(d *metrics.Deps) {
	d.LogRegistry = logging.NewRegistry(logging.WithOutput(io.Discard))
}

// served builds a metrics plugin behind a real REST server and runs Init.
func served(t *testing.T, opts ...metrics.Option) (*metrics.Plugin, *resttest.Server) {
	t.Helper()
	srv := resttest.New(t)
	opts = append([]metrics.Option{
		metrics.UseConf(metrics.DefaultConfig()),
		metrics.UseDeps(func(d *metrics.Deps) { quiet(d); d.HTTP = srv.Plugin }),
	}, opts...)
	p := metrics.NewPlugin(opts...)
	NewWithT(t).Expect(p.Init()).To(Succeed())
	t.Cleanup(func() { NewWithT(t).Expect(p.Close()).To(Succeed()) })
	return p, srv
}

func TestCountersAndRuntimeMetricsServed(t *testing.T) {
	g := NewWithT(t)
	early := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_early_total", Help: "registered before Init"})
	p := metrics.NewPlugin(metrics.UseDeps(quiet), metrics.UseConf(metrics.DefaultConfig()))
	g.Expect(p.Register(early)).To(Succeed())
	srv := resttest.New(t)
	p.HTTP = srv.Plugin
	g.Expect(p.Init()).To(Succeed())
	defer func() { g.Expect(p.Close()).To(Succeed()) }()

	late := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "contiv", Subsystem: "test", Name: "requests_total", Help: "registered after Init",
	}, []string{"kind"})
	g.Expect(p.Registerer().Register(late)).To(Succeed())
	early.Add(2)
	late.WithLabelValues("add").Add(3)

	status, body := srv.Get("/metrics")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("test_early_total 2"))
	g.Expect(body).To(ContainSubstring(`contiv_test_requests_total{kind="add"} 3`))
	g.Expect(body).To(ContainSubstring("go_goroutines "))
	g.Expect(body).To(ContainSubstring("process_"))

	var already prometheus.AlreadyRegisteredError
	g.Expect(errors.As(p.Register(early), &already)).To(BeTrue(), "registering twice fails")
	g.Expect(p.Unregister(early)).To(BeTrue())
	_, body = srv.Get("/metrics")
	g.Expect(body).NotTo(ContainSubstring("test_early_total"))
}

func TestNeverTheGlobalRegistry(t *testing.T) {
	g := NewWithT(t)
	p, _ := served(t)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_private_total", Help: "h"})
	g.Expect(p.Register(c)).To(Succeed())
	families, err := prometheus.DefaultGatherer.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		g.Expect(f.GetName()).NotTo(Equal("test_private_total"))
	}
	other, _ := served(t)
	g.Expect(other.Register(c)).To(Succeed(), "two plugins, two registries")
}

// fromFile builds a plugin reading body as metrics.conf, behind srv.
func fromFile(t *testing.T, srv *resttest.Server, body string) *metrics.Plugin {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metrics.conf")
	NewWithT(t).Expect(os.WriteFile(path, []byte(body), 0o600)).To(Succeed())
	return metrics.NewPlugin(metrics.UseDeps(func(d *metrics.Deps) {
		quiet(d)
		d.HTTP = srv.Plugin
		d.Cfg = config.ForPlugin(metrics.Name, config.WithPath(path))
	}))
}

func TestConfigFile(t *testing.T) {
	sample, err := os.ReadFile("metrics.conf")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cases := []struct {
		name, file string
		wantErr    []string
		served     string
	}{
		{name: "shipped sample", file: string(sample), served: "/metrics"},
		{name: "empty file", file: "", served: "/metrics"},
		{name: "custom path", file: "path: /prom\n", served: "/prom"},
		{name: "relative path", file: "path: prom\n", wantErr: []string{"metrics.conf", "path", `"prom"`}},
		{name: "root path", file: "path: /\n", wantErr: []string{"path", `"/"`}},
		{name: "path with a variable", file: "path: /m/{x}\n", wantErr: []string{"path", `"/m/{x}"`}},
		{name: "unknown key", file: "pth: /m\n", wantErr: []string{`unknown key "pth"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := resttest.New(t)
			p := fromFile(t, srv, tc.file)
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
			status, body := srv.Get(tc.served)
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(body).To(ContainSubstring("go_goroutines"))
		})
	}
}

func TestInjectedRegistry(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	g.Expect(reg.Register(collectors.NewGoCollector())).To(Succeed())
	p := metrics.NewPlugin(metrics.UseDeps(quiet), metrics.UseConf(metrics.DefaultConfig()), metrics.UseRegistry(reg))
	g.Expect(p.Init()).To(Succeed(), "a Go collector already present is fine")
	c := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_injected", Help: "h"})
	g.Expect(p.Register(c)).To(Succeed())
	names := func() []string {
		families, err := reg.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, f := range families {
			out = append(out, f.GetName())
		}
		return out
	}
	g.Expect(names()).To(ContainElements("test_injected", "go_goroutines", "process_cpu_seconds_total"))
	g.Expect(p.Close()).To(Succeed())
	g.Expect(names()).To(ContainElement("go_goroutines"), "the caller's Go collector stays")
	g.Expect(names()).NotTo(ContainElement("process_cpu_seconds_total"), "Close removes what Init added")
	g.Expect(p.Init()).To(Succeed(), "Init works again after Close")
	g.Expect(p.Close()).To(Succeed())
}

func TestWithoutHTTP(t *testing.T) {
	g := NewWithT(t)
	p := metrics.NewPlugin(metrics.UseDeps(quiet), metrics.UseConf(metrics.DefaultConfig()))
	g.Expect(p.Init()).To(Succeed())
	families, err := p.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(families).NotTo(BeEmpty())
	g.Expect(p.Close()).To(Succeed())
}
