package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// loopMetrics are the controller's Prometheus metrics.
type loopMetrics struct {
	events   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	queue    *prometheus.Desc
	queueLen func() int
	// badValues counts the Kubernetes-state keys skipped by the DB
	// watcher: a value that does not decode keeps the key's last good
	// value, it is never a delete.
	badValues *prometheus.CounterVec
}

func newLoopMetrics() *loopMetrics {
	return &loopMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_controller_events_total",
			Help: "Events processed by the controller's event loop, by event name and outcome (ok, error, abort, fatal).",
		}, []string{"event", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "contiv_controller_event_processing_seconds",
			Help:    "Time to process one event (handlers, commit, recording), by event name.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100µs .. 26s
		}, []string{"event"}),
		queue: prometheus.NewDesc("contiv_controller_event_queue_length",
			"Events waiting in the controller's queue.", nil, nil),
		queueLen: func() int { return 0 },
		badValues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_controller_kube_state_bad_values_total",
			Help: "Kubernetes-state keys in etcd skipped because their value does not decode (the key keeps its last good value; never handled as a delete), by resource; resource=unknown for keys of no known resource.",
		}, []string{"resource"}),
	}
}

// badValue counts a key skipped by the DB watcher.
func (m *loopMetrics) badValue(resource string) {
	if resource == "" {
		resource = "unknown"
	}
	m.badValues.WithLabelValues(resource).Inc()
}

func (m *loopMetrics) observe(rec *EventRecord, err error) {
	m.events.WithLabelValues(rec.Name, outcomeOf(err)).Inc()
	m.duration.WithLabelValues(rec.Name).Observe(rec.ProcessingEnd.Sub(rec.ProcessingStart).Seconds())
}

// outcomeOf names the outcome label of an event's error.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case api.IsFatal(err):
		return "fatal"
	case api.IsAbort(err):
		return "abort"
	default:
		return "error"
	}
}

// Describe implements prometheus.Collector.
func (m *loopMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.events.Describe(ch)
	m.duration.Describe(ch)
	m.badValues.Describe(ch)
	ch <- m.queue
}

// Collect implements prometheus.Collector.
func (m *loopMetrics) Collect(ch chan<- prometheus.Metric) {
	m.events.Collect(ch)
	m.duration.Collect(ch)
	m.badValues.Collect(ch)
	ch <- prometheus.MustNewConstMetric(m.queue, prometheus.GaugeValue, float64(m.queueLen()))
}
