package health_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/logmanager"
	"github.com/contiv-ipam/agent/infra/metrics"
	"github.com/contiv-ipam/agent/infra/rest"
	"github.com/contiv-ipam/agent/infra/servicelabel"
)

// TestFrameworkPluginsUnderTheAgent wires the five framework plugins the
// way cmd/ does and checks that the agent orders, configures and serves
// them (health.conf of this directory is the shipped sample).
func TestFrameworkPluginsUnderTheAgent(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(logging.EnvInitialLevel, "")
	t.Setenv("HTTP_PORT", "")
	reg := logging.NewRegistry(logging.WithOutput(io.Discard))
	httpP := rest.NewPlugin(rest.UseDeps(func(d *rest.Deps) { d.LogRegistry = reg }))
	metricsP := metrics.NewPlugin(metrics.UseDeps(func(d *metrics.Deps) { d.LogRegistry = reg; d.HTTP = httpP }))
	healthP := health.NewPlugin(health.UseBuildInfo(health.BuildInfo{Version: "test"}),
		health.UseDeps(func(d *health.Deps) { d.LogRegistry = reg; d.HTTP = httpP; d.Metrics = metricsP }))
	logsP := logmanager.NewPlugin(logmanager.UseDeps(func(d *logmanager.Deps) { d.LogRegistry = reg; d.HTTP = httpP }))
	labelP := servicelabel.NewPlugin(servicelabel.UseDeps(func(d *servicelabel.Deps) { d.LogRegistry = reg }))

	a, err := agent.NewAgent(agent.AllPlugins(healthP, logsP, labelP),
		agent.Args([]string{"-http-port", "0", "-microservice-label", "node-7"}),
		agent.Logger(reg.Logger("agent")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Start()).To(Succeed())
	defer func() { g.Expect(a.Stop()).To(Succeed()) }()

	g.Expect(labelP.GetAgentPrefix()).To(Equal("/vnf-agent/node-7/"))
	g.Expect(httpP.Addr()).To(HavePrefix("127.0.0.1:"), "loopback, port from -http-port")
	base := "http://" + httpP.Addr()
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}
	status, body := get("/readiness")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`"version": "test"`))
	status, body = get("/metrics")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(And(ContainSubstring("agent_health 0"), ContainSubstring("go_goroutines")))
	status, body = get("/log/list")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`"logger": "http"`))
	status, body = get("/")
	g.Expect(status).To(Equal(http.StatusOK))
	for _, path := range []string{"/liveness", "/readiness", "/metrics", "/log/list", "/log/{logger}/{level}"} {
		g.Expect(body).To(ContainSubstring(`"path": "` + path + `"`))
	}

	healthP.ReportStateChange("ipam", health.Error, nil)
	status, _ = get("/readiness")
	g.Expect(status).To(Equal(http.StatusServiceUnavailable))
}
