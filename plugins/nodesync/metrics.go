package nodesync

import "github.com/prometheus/client_golang/prometheus"

// Label values of the metrics.
const (
	changeRefused  = "refused"
	changeAccepted = "accepted"
	conflictID     = "node-id"
	conflictName   = "node-name"
)

// nodesyncMetrics are the plugin's Prometheus metrics; they count even
// when no registry is wired.
type nodesyncMetrics struct {
	idChanges *prometheus.CounterVec
	conflicts *prometheus.CounterVec
}

// newNodesyncMetrics returns the metrics with every label value at zero,
// so that an alert on increase() sees the first conflict (a series born
// at 1 has no increase).
func newNodesyncMetrics() *nodesyncMetrics {
	m := &nodesyncMetrics{
		idChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_nodesync_node_id_changes_total",
			Help: "Claims that gave this node another ID than the one it last ran with, by action (refused: the agent stays unready; accepted: -accept-node-id-change).",
		}, []string{"action"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_nodesync_conflicts_total",
			Help: "Fatal conflicts: this node's ID held by another node (node-id), or its node name served by another live agent (node-name).",
		}, []string{"kind"}),
	}
	for _, action := range []string{changeRefused, changeAccepted} {
		m.idChanges.WithLabelValues(action)
	}
	for _, kind := range []string{conflictID, conflictName} {
		m.conflicts.WithLabelValues(kind)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *nodesyncMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.idChanges.Describe(ch)
	m.conflicts.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *nodesyncMetrics) Collect(ch chan<- prometheus.Metric) {
	m.idChanges.Collect(ch)
	m.conflicts.Collect(ch)
}
