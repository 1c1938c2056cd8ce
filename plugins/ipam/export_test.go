package ipam

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Test hooks, compiled into the tests only.

// QueuedRequests is the number of requests waiting for the keeper.
func QueuedRequests(p *Plugin) int { return len(p.keeper.reqs) }

// Clock is the keeper's time source.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

// UseClock replaces the system clock.
func UseClock(c Clock) Option { return func(p *Plugin) { p.clock = c } }

// AbsentReleases counts the addresses released after the grace period.
func AbsentReleases(p *Plugin) prometheus.Collector {
	return p.metrics.reclaimed.WithLabelValues(reasonAbsent)
}

// AllocationsOf is the reply of GET /contiv/v1/ipam/allocations.
func AllocationsOf(p *Plugin) Allocations { return p.allocations() }

// KubeStateIsLive tells whether the keeper's view of the Kubernetes pods
// comes from etcd (a remote DB resync), not from the local mirror.
func KubeStateIsLive(p *Plugin) (live bool) {
	p.keeper.read(func(*table) { live = p.keeper.view.live })
	return live
}
