package ksr

import "github.com/prometheus/client_golang/prometheus"

// ksrMetrics are the plugin's Prometheus metrics; they count even when no
// registry is wired.
type ksrMetrics struct {
	leader   prometheus.Gauge
	leads    prometheus.Counter
	writes   *prometheus.CounterVec
	resyncs  *prometheus.CounterVec
	fixes    *prometheus.CounterVec
	releases prometheus.Counter
	beats    prometheus.Counter
}

func newKSRMetrics() *ksrMetrics {
	return &ksrMetrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "contiv_ksr_leader",
			Help: "1 while this replica leads (and alone writes to etcd), 0 while it stands by.",
		}),
		leads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "contiv_ksr_leadership_acquired_total",
			Help: "Times this replica won the election.",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_ksr_writes_total",
			Help: "Keys written to etcd by resource and operation (put, delete); objects whose mirrored fields did not change are not written.",
		}, []string{"resource", "op"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_ksr_resyncs_total",
			Help: "Mark-and-sweep resyncs of etcd against the API, by result (ok, error).",
		}, []string{"result"}),
		fixes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_ksr_resync_fixes_total",
			Help: "Keys resyncs fixed, by resource and fix (added: missing in etcd; updated: another value in etcd; deleted: stale, not in the API).",
		}, []string{"resource", "fix"}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "contiv_ksr_node_id_releases_total",
			Help: "Node IDs freed because their Kubernetes Node had been gone for the grace period.",
		}),
		beats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "contiv_ksr_mirror_heartbeats_total",
			Help: "Mirror markers written (each once the mirror was complete): the agents release pods missing from the mirror only while the marker changed within three heartbeats.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (m *ksrMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *ksrMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

func (m *ksrMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.leader, m.leads, m.writes, m.resyncs, m.fixes, m.releases, m.beats}
}
