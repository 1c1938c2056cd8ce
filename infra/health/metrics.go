package health

import "github.com/prometheus/client_golang/prometheus"

// collector exports the agent state and every plugin state as gauges (0 ok,
// 1 init, 2 error), read from the status book at scrape time.
type collector struct {
	book   *statusBook
	agent  *prometheus.Desc
	plugin *prometheus.Desc
}

func newCollector(book *statusBook) *collector {
	return &collector{
		book: book,
		agent: prometheus.NewDesc("agent_health",
			"Agent state: 0 ok, 1 init, 2 error (worst state of the fatal plugins).", nil, nil),
		plugin: prometheus.NewDesc("agent_plugin_health",
			"Plugin state: 0 ok, 1 init, 2 error.", []string{"plugin"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.agent
	ch <- c.plugin
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.book.snapshot()
	ch <- prometheus.MustNewConstMetric(c.agent, prometheus.GaugeValue, float64(s.State))
	for _, ps := range s.Plugins {
		ch <- prometheus.MustNewConstMetric(c.plugin, prometheus.GaugeValue, float64(ps.State), ps.Name)
	}
}
