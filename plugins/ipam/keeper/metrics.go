package keeper

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the keeper's counters. The plugin registers them (they are
// a prometheus.Collector), beside its gauges of the pools.
type Metrics struct {
	failed prometheus.Counter
	// storeFailures counts the transactions that were not applied or
	// whose outcome was unknown; refused the requests answered "try
	// again" without a decision.
	storeFailures *prometheus.CounterVec
	refused       *prometheus.CounterVec
	movedAside    prometheus.Counter
	reclaimed     *prometheus.CounterVec
	// released counts every address released, by reason.
	released *prometheus.CounterVec
	// evidence is 1 while pods missing from Kubernetes may be released.
	evidence prometheus.Gauge
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics returns the counters, at zero: every known label value is
// there from the start, so that an alert on increase() sees the first
// failure or release (a series born at 1 has no increase).
func NewMetrics() *Metrics {
	m := newMetrics()
	for _, outcome := range []string{outcomeNotApplied, outcomeUnknown} {
		m.storeFailures.WithLabelValues(outcome)
	}
	for _, reason := range []string{"queue", "store"} {
		m.refused.WithLabelValues(reason)
	}
	for _, reason := range []string{reasonAbsent, reasonExpired} {
		m.reclaimed.WithLabelValues(reason)
	}
	for _, reason := range []string{ReleaseCall, ReleaseGC, ReleaseObsolete, ReleaseOperator, ReleasePool, ReleaseRuntime, reasonExpired, reasonAbsent} {
		m.released.WithLabelValues(reason)
	}
	return m
}

// The outcomes of contiv_ipam_store_failures_total (batch.go).
const (
	outcomeNotApplied = "not applied"
	outcomeUnknown    = "unknown"
)

func newMetrics() *Metrics {
	return &Metrics{
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
			Help: "Addresses released without a CNI DEL: reason=absent, the pod was missing from Kubernetes when seen twice a grace period apart; reason=expired, its reservation ended unconfirmed.",
		}, []string{"reason"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "contiv_ipam_pod_ips_released_total",
			Help: "Allocations released, by reason: call (a CNI DEL of its key, ReleasePodIP), gc (a CNI GC that did not list it), obsolete (the pod's new container took its interface), operator (the operator's release by IP or owner, the Cilium-style API), pool (its pool was removed), runtime (the container runtime had no sandbox of it at two looks a GC period apart), expired (its reservation ended unconfirmed), absent (its pod missing from Kubernetes, seen twice a grace period apart on fresh evidence).",
		}, []string{"reason"}),
		evidence: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "contiv_ipam_absent_pod_releases_enabled",
			Help: "1 while addresses of pods missing from Kubernetes may be released after their grace period (contiv-ksr's mirror marker is fresh and the state is etcd's), 0 while not: why is logged and shown by GET /contiv/v1/ipam/release-candidates.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.failed.Describe(ch)
	m.storeFailures.Describe(ch)
	m.refused.Describe(ch)
	m.movedAside.Describe(ch)
	m.reclaimed.Describe(ch)
	m.evidence.Describe(ch)
	m.released.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.failed.Collect(ch)
	m.storeFailures.Collect(ch)
	m.refused.Collect(ch)
	m.movedAside.Collect(ch)
	m.reclaimed.Collect(ch)
	m.evidence.Collect(ch)
	m.released.Collect(ch)
}

// The reasons of contiv_ipam_pod_ips_released_total (with reasonExpired
// and reasonAbsent).
const (
	ReleaseCall     = "call"
	ReleaseGC       = "gc"
	ReleaseObsolete = "obsolete"
	ReleaseOperator = "operator"
	ReleasePool     = "pool"
	// ReleaseRuntime: the container runtime had no sandbox of it at two
	// looks a GC period apart (runtime.go).
	ReleaseRuntime = "runtime"
)

// Released counts the addresses released for reason.
func (m *Metrics) Released(reason string) prometheus.Counter {
	return m.released.WithLabelValues(reason)
}

// FailedAllocations counts the allocations that failed (the plugin
// counts those it refuses before they reach the keeper).
func (m *Metrics) FailedAllocations() prometheus.Counter { return m.failed }

// AbsentReleases counts the addresses released after the grace period.
func (m *Metrics) AbsentReleases() prometheus.Counter {
	return m.reclaimed.WithLabelValues(reasonAbsent)
}

// MirrorView is what the keeper knows of contiv-ksr's mirror marker, for
// the metrics.
type MirrorView struct {
	// Age is how long ago (keeper clock) the marker last changed; valid
	// only when Changed.
	Age time.Duration
	// Changed: a marker newer than the first one seen since the agent
	// started has been seen (the first may be a dead contiv-ksr's last
	// word, so it does not count).
	Changed bool
	// StaleAfter is how long the marker stays fresh without a newer one
	// (three of its heartbeats, at least 3 s).
	StaleAfter time.Duration
}

// Mirror reports the marker's freshness as the evidence rule sees it
// (evidence.go); the zero MirrorView before the keeper started.
func (k *Keeper) Mirror() MirrorView {
	var v MirrorView
	k.Do(&Request{Kind: reqInspect, read: func(*table) {
		v.StaleAfter = k.staleAfter()
		if !k.mir.changed.IsZero() {
			v.Age, v.Changed = k.clock.Now().Sub(k.mir.changed), true
		}
	}})
	return v
}
