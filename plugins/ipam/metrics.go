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
	// mirrorAge, staleAfter: contiv-ksr's mirror marker as the evidence
	// rule sees it; inFlight: the store's unsettled transactions.
	mirrorAge  *prometheus.Desc
	staleAfter *prometheus.Desc
	inFlight   *prometheus.Desc
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
			"Addresses of this node's pod subnet (or added pool) by state: assigned, cooldown (released, not handed out again yet), excluded, free; family ipv4 or ipv6. Absent with an external IPAM.",
			[]string{"subnet", "family", "state"}, nil),
		cands: prometheus.NewDesc("contiv_ipam_release_candidates",
			"Pods holding addresses that the Kubernetes state lacks: each is released once its grace period ends only if a look then still misses it (GET /contiv/v1/ipam/release-candidates lists them).",
			nil, nil),
		mirrorAge: prometheus.NewDesc("contiv_ipam_mirror_marker_age_seconds",
			"Seconds since contiv-ksr's mirror marker last changed, as this agent saw it (its own clock); absent until the marker changed once since the agent started. Absent pods are released only while it is at most contiv_ipam_mirror_marker_stale_after_seconds.",
			nil, nil),
		staleAfter: prometheus.NewDesc("contiv_ipam_mirror_marker_stale_after_seconds",
			"How long contiv-ksr's mirror marker stays fresh without a change: three of its heartbeats (contiv-ksr's mirrorHeartbeat), at least 3 s.",
			nil, nil),
		inFlight: prometheus.NewDesc("contiv_ipam_store_writes_in_flight",
			"Transactions of pod allocations handed to the local store (bolt) whose outcome is not settled yet; a CNI ADD is answered once its own is durable.",
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
	ch <- m.mirrorAge
	ch <- m.staleAfter
	ch <- m.inFlight
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
				ch <- prometheus.MustNewConstMetric(m.states, prometheus.GaugeValue, float64(n), s.CIDR, string(s.Family), state)
			}
		}
	})
	cands, _ := m.p.keeper.Candidates()
	ch <- prometheus.MustNewConstMetric(m.cands, prometheus.GaugeValue, float64(len(cands)))
	mir := m.p.keeper.Mirror()
	if mir.Changed {
		ch <- prometheus.MustNewConstMetric(m.mirrorAge, prometheus.GaugeValue, mir.Age.Seconds())
	}
	if mir.StaleAfter > 0 {
		ch <- prometheus.MustNewConstMetric(m.staleAfter, prometheus.GaugeValue, mir.StaleAfter.Seconds())
	}
	ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(m.p.keeper.WritesInFlight()))
}
