package nodeipam

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the allocators' Prometheus metrics. They count whether or
// not they are registered; one Metrics serves the allocators of successive
// leaderships (contiv-ksr registers it once).
type Metrics struct {
	allocations *prometheus.CounterVec
	releases    *prometheus.CounterVec
	failures    *prometheus.CounterVec
	used        *prometheus.GaugeVec
	free        *prometheus.GaugeVec
	fenced      *prometheus.GaugeVec
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics returns the metrics, at zero.
func NewMetrics() *Metrics {
	return &Metrics{
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_nodeipam_allocations_total",
			Help: "Node CIDRs handed out (or occupied for a node that held them), by cluster range.",
		}, []string{"cluster_cidr"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_nodeipam_releases_total",
			Help: "Node CIDRs freed (deleted nodes, abandoned claims), by cluster range.",
		}, []string{"cluster_cidr"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_nodeipam_failures_total",
			Help: "Nodes that could not be given or checked CIDRs, by reason (the event reasons: CIDRNotAvailable, CIDRAssignmentFailed, CIDROutOfRange, CIDRConflict, CloudCIDRAllocatorInvalidPodCIDR, CloudCIDRAllocatorInvalidMode, CloudCIDRAllocatorMismatch; and cloud, a failed Cloud call).",
		}, []string{"reason"}),
		used: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contiv_nodeipam_cidrs_used",
			Help: "Node CIDRs taken in the cluster range.",
		}, []string{"cluster_cidr"}),
		free: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contiv_nodeipam_cidrs_free",
			Help: "Node CIDRs that can still be handed out in the cluster range (service ranges excluded).",
		}, []string{"cluster_cidr"}),
		fenced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "contiv_nodeipam_cidrs_fenced",
			Help: "Node CIDRs of deleted Nodes kept from every other node while the deleted node's agent may still hold addresses in them, by cluster range.",
		}, []string{"cluster_cidr"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

func (m *Metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.allocations, m.releases, m.failures, m.used, m.free, m.fenced}
}

// gauge sets the usage of s.
func (m *Metrics) gauge(s *CIDRSet) {
	label := s.ClusterCIDR().String()
	m.used.WithLabelValues(label).Set(float64(s.Used()))
	m.free.WithLabelValues(label).Set(float64(s.Free()))
}

// fail counts a failure.
func (m *Metrics) fail(reason string) { m.failures.WithLabelValues(reason).Inc() }
