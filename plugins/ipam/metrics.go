package ipam

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
)

// ipamMetrics are the plugin's Prometheus metrics: the keeper's counters,
// the plugin's own, and gauges of the pools read at scrape time from the
// keeper without waiting for the writes in flight.
type ipamMetrics struct {
	p         *Plugin
	keeper    *keeper.Metrics
	invalid   *prometheus.CounterVec
	size      *prometheus.Desc
	allocated *prometheus.Desc
	states    *prometheus.Desc
	cands     *prometheus.Desc
}

func newIPAMMetrics(p *Plugin) *ipamMetrics {
	return &ipamMetrics{
		p:      p,
		keeper: keeper.NewMetrics(),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_ipam_invalid_values_total",
			Help: "Values of the Kubernetes state IPAM could not use and ignored (value=pod_CIDR: this node's pod CIDR with external IPAM).",
		}, []string{"value"}),
		size: prometheus.NewDesc("contiv_ipam_pod_ip_pool_size",
			"Addresses of this node's pod subnet that can be handed out to pods.", []string{"subnet"}, nil),
		allocated: prometheus.NewDesc("contiv_ipam_pod_ips_allocated",
			"Pod addresses allocated on this node.", []string{"subnet"}, nil),
		states: prometheus.NewDesc("contiv_ipam_pod_ip_pool_addresses",
			"Addresses of this node's pod subnet by state: assigned, cooldown (released, not handed out again yet), excluded, free.",
			[]string{"subnet", "state"}, nil),
		cands: prometheus.NewDesc("contiv_ipam_release_candidates",
			"Pods holding addresses that the Kubernetes state lacks: each is released once its grace period ends only if a look then still misses it (GET /contiv/v1/ipam/release-candidates lists them).",
			nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *ipamMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.keeper.Describe(ch)
	m.invalid.Describe(ch)
	ch <- m.size
	ch <- m.allocated
	ch <- m.states
	ch <- m.cands
}

// Collect implements prometheus.Collector.
func (m *ipamMetrics) Collect(ch chan<- prometheus.Metric) {
	m.keeper.Collect(ch)
	m.invalid.Collect(ch)
	m.p.keeper.Inspect(func(pools []keeper.PoolStats, external bool) {
		for _, s := range pools {
			ch <- prometheus.MustNewConstMetric(m.size, prometheus.GaugeValue, float64(s.Total), s.CIDR)
			ch <- prometheus.MustNewConstMetric(m.allocated, prometheus.GaugeValue, float64(s.Assigned), s.CIDR)
			if external {
				continue
			}
			for state, n := range map[string]uint64{"assigned": s.Assigned, "cooldown": s.Cooldown, "excluded": s.Excluded, "free": s.Free} {
				ch <- prometheus.MustNewConstMetric(m.states, prometheus.GaugeValue, float64(n), s.CIDR, state)
			}
		}
	})
	cands, _ := m.p.keeper.Candidates()
	ch <- prometheus.MustNewConstMetric(m.cands, prometheus.GaugeValue, float64(len(cands)))
}
