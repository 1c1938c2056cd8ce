package health_test

import (
	"errors"
	"io"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/logging"
	"github.com/contiv-ipam/agent/infra/metrics"
)

// gauges returns every sample of the agent_health and agent_plugin_health
// gauges, keyed "agent" or the plugin label.
func gauges(g *WithT, gatherer prometheus.Gatherer) map[string]float64 {
	families, err := gatherer.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "agent_health":
				out["agent"] = m.GetGauge().GetValue()
			case "agent_plugin_health":
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func TestHealthGauges(t *testing.T) {
	g := NewWithT(t)
	m := metrics.NewPlugin(metrics.UseConf(metrics.DefaultConfig()), metrics.UseDeps(func(d *metrics.Deps) {
		d.LogRegistry = logging.NewRegistry(logging.WithOutput(io.Discard))
	}))
	g.Expect(m.Init()).To(Succeed())
	defer func() { g.Expect(m.Close()).To(Succeed()) }()
	p := health.NewPlugin(health.UseConf(health.DefaultConfig()), health.UseDeps(func(d *health.Deps) {
		quiet(d)
		d.Metrics = m // the metrics plugin is a prometheus.Registerer
	}))
	g.Expect(p.Init()).To(Succeed())

	g.Expect(gauges(g, m)).To(Equal(map[string]float64{"agent": 0}))
	p.Register("ipam", nil)
	p.ReportStateChange("kvdb", health.OK, nil)
	g.Expect(gauges(g, m)).To(Equal(map[string]float64{"agent": 1, "ipam": 1, "kvdb": 0}))
	p.ReportStateChange("kvdb", health.Error, errors.New("down"))
	g.Expect(gauges(g, m)).To(Equal(map[string]float64{"agent": 2, "ipam": 1, "kvdb": 2}))

	g.Expect(p.Close()).To(Succeed())
	g.Expect(gauges(g, m)).To(BeEmpty(), "Close unregisters the gauges")
	g.Expect(p.Init()).To(Succeed(), "and Init can register them again")
	g.Expect(p.Close()).To(Succeed())
}
