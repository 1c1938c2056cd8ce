package ipam

import "github.com/prometheus/client_golang/prometheus"

// ipamMetrics are the plugin's Prometheus metrics; the gauges are read at
// scrape time from the keeper (after the writes in flight).
type ipamMetrics struct {
	p      *Plugin
	failed prometheus.Counter
	// storeFailures counts the transactions that were not applied or
	// whose outcome was unknown; refused the requests answered "try
	// again later" without a decision.
	storeFailures *prometheus.CounterVec
	refused       *prometheus.CounterVec
	movedAside    prometheus.Counter
	reclaimed     *prometheus.CounterVec
	invalid       *prometheus.CounterVec
	size          *prometheus.Desc
	allocated     *prometheus.Desc
	states        *prometheus.Desc
}

func newIPAMMetrics(p *Plugin) *ipamMetrics {
	return &ipamMetrics{
		p: p,
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "contiv_ipam_pod_ip_allocation_failures_total",
			Help: "Pod IP allocations that failed (pool full, bad external IPAM data, store error).",
		}),
		storeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_ipam_store_failures_total",
			Help: "Transactions of pod allocations that failed: outcome=not applied (the store refused or withdrew them: a full disk, a store too slow for storeTimeout), outcome=unknown (the store could not say; resolved by a read ordered after them).",
		}, []string{"outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_ipam_requests_refused_total",
			Help: "Requests answered 'try again later' (CNI code 11) without a decision, by reason: queue (IPAM holds as many requests as it may), store (the store's write queue is full).",
		}, []string{"reason"}),
		movedAside: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "contiv_ipam_records_moved_aside_total",
			Help: "Stored pod allocations a restore could not place (a clash, outside every pod subnet and pool of the node), moved under the conflicts prefix for an operator (GET /contiv/v1/ipam/conflicts).",
		}),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_ipam_pod_ips_reclaimed_total",
			Help: "Addresses released without a CNI DEL: reason=absent, the pod was missing from Kubernetes for the grace period; reason=deleted, it was deleted while the watch was cut off.",
		}, []string{"reason"}),
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
	}
}

// Describe implements prometheus.Collector.
func (m *ipamMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.failed.Describe(ch)
	m.storeFailures.Describe(ch)
	m.refused.Describe(ch)
	m.movedAside.Describe(ch)
	m.reclaimed.Describe(ch)
	m.invalid.Describe(ch)
	ch <- m.size
	ch <- m.allocated
	ch <- m.states
}

// Collect implements prometheus.Collector.
func (m *ipamMetrics) Collect(ch chan<- prometheus.Metric) {
	m.failed.Collect(ch)
	m.storeFailures.Collect(ch)
	m.refused.Collect(ch)
	m.movedAside.Collect(ch)
	m.reclaimed.Collect(ch)
	m.invalid.Collect(ch)
	m.p.keeper.read(func(t *table) {
		for _, s := range t.stats() {
			ch <- prometheus.MustNewConstMetric(m.size, prometheus.GaugeValue, float64(s.Total), s.CIDR)
			ch <- prometheus.MustNewConstMetric(m.allocated, prometheus.GaugeValue, float64(s.Assigned), s.CIDR)
			if t.externalMode() {
				continue
			}
			for state, n := range map[string]uint64{"assigned": s.Assigned, "cooldown": s.Cooldown, "excluded": s.Excluded, "free": s.Free} {
				ch <- prometheus.MustNewConstMetric(m.states, prometheus.GaugeValue, float64(n), s.CIDR, state)
			}
		}
	})
}
