package podmanager

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Method label values of the metrics (the RemoteCNI methods).
const (
	methodAdd     = "add"
	methodDelete  = "delete"
	methodCheck   = "check"
	methodGC      = "gc"
	methodStatus  = "status"
	methodConfirm = "confirm"
)

// podmanagerMetrics are the plugin's Prometheus metrics; they count even
// when no registry is wired.
type podmanagerMetrics struct {
	requests          *prometheus.CounterVec
	latency           *prometheus.HistogramVec
	connections       prometheus.Gauge   // limitListener
	handshakeTimeouts prometheus.Counter // limitListener
	runtimeUp         prometheus.Gauge   // runtimeLoop
	runtimeLists      *prometheus.CounterVec
	runtimeOn         bool // set by Init: runtimeUp is collected
}

// newPodmanagerMetrics returns the metrics; the latency of every method is
// there from the start (empty), so that a dashboard shows no calls rather
// than no data.
func newPodmanagerMetrics() *podmanagerMetrics {
	m := &podmanagerMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_podmanager_requests_total",
			Help: "CNI calls answered on the socket, by method and CNI error code (0: OK; 11: try again later; 100 and above: the agent's own codes).",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "contiv_podmanager_request_duration_seconds",
			Help: "Time from receiving a CNI call to answering it, by method (an Add includes its durable write).",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
				0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"method"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "contiv_podmanager_open_connections",
			Help: "Connections open on the CNI socket, at most maxConnections (further ones wait in the kernel's accept backlog).",
		}),
		handshakeTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "contiv_podmanager_handshake_timeouts_total",
			Help: "Connections to the CNI socket closed because they did not complete the gRPC (HTTP/2) handshake within handshakeTimeout.",
		}),
		runtimeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "contiv_podmanager_runtime_up",
			Help: "1 while the last list of the container runtime's pod sandboxes (criSocket) answered, 0 while it fails: no pod missing from Kubernetes is released then; absent without criSocket.",
		}),
		runtimeLists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_podmanager_runtime_lists_total",
			Help: "Lists of the container runtime's pod sandboxes, by result (ok, error).",
		}, []string{"result"}),
	}
	for _, method := range []string{methodAdd, methodDelete, methodCheck, methodGC, methodStatus, methodConfirm} {
		m.latency.WithLabelValues(method)
	}
	return m
}

// observe counts one answered call.
func (m *podmanagerMetrics) observe(method string, code uint32, took time.Duration) {
	m.requests.WithLabelValues(method, strconv.FormatUint(uint64(code), 10)).Inc()
	m.latency.WithLabelValues(method).Observe(took.Seconds())
}

// Describe implements prometheus.Collector.
func (m *podmanagerMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.latency.Describe(ch)
	m.connections.Describe(ch)
	m.handshakeTimeouts.Describe(ch)
	m.runtimeLists.Describe(ch)
	m.runtimeUp.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *podmanagerMetrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.latency.Collect(ch)
	m.connections.Collect(ch)
	m.handshakeTimeouts.Collect(ch)
	m.runtimeLists.Collect(ch)
	if m.runtimeOn {
		m.runtimeUp.Collect(ch)
	}
}
