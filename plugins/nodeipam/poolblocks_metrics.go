package nodeipam

import "github.com/prometheus/client_golang/prometheus"

// PoolBlockMetrics are the PoolBlockServer's Prometheus metrics. They
// count whether or not they are registered; one PoolBlockMetrics serves
// the servers of successive leaderships (contiv-ksr registers it once).
type PoolBlockMetrics struct {
	granted  *prometheus.GaugeVec
	free     *prometheus.GaugeVec
	pending  prometheus.Gauge
	failures *prometheus.CounterVec
	fenced   *prometheus.GaugeVec
}

var _ prometheus.Collector = (*PoolBlockMetrics)(nil)

// NewPoolBlockMetrics returns the metrics, at zero.
func NewPoolBlockMetrics() *PoolBlockMetrics {
	return &PoolBlockMetrics{
		granted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contiv_nodeipam_pool_blocks_granted",
			Help: "Added pod-address blocks held by the nodes (granted, or being granted), by family.",
		}, []string{"family"}),
		free: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contiv_nodeipam_pool_blocks_free",
			Help: "Added pod-address blocks that can still be granted, by family.",
		}, []string{"family"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "contiv_nodeipam_pool_claims_pending",
			Help: "Pool claims not served yet: blocks wanted that a full range cannot give, or a grant not yet written.",
		}),
		fenced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contiv_nodeipam_pool_blocks_fenced",
			Help: "Pool blocks of nodes gone from Kubernetes kept from every other node while the gone node's agent may still hold addresses in them, by family.",
		}, []string{"family"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_nodeipam_pool_block_failures_total",
			Help: "Pool block problems, by reason (the event reasons: PoolBlockNotAvailable, PoolBlockConflict, PoolBlockOutOfRange, InvalidPoolClaim).",
		}, []string{"reason"}),
	}
}

// Describe implements prometheus.Collector.
func (m *PoolBlockMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *PoolBlockMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

func (m *PoolBlockMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.granted, m.free, m.pending, m.failures, m.fenced}
}

// gauge sets the usage of the sets of b.
func (m *PoolBlockMetrics) gauge(b *poolBook) {
	for f, s := range b.sets {
		m.granted.WithLabelValues(f).Set(float64(s.Used()))
		m.free.WithLabelValues(f).Set(float64(s.Free()))
	}
}

// fail counts a problem.
func (m *PoolBlockMetrics) fail(reason string) { m.failures.WithLabelValues(reason).Inc() }
