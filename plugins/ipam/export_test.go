package ipam

import (
	"context"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Test hooks, compiled into the tests only.

// QueuedRequests is the number of requests waiting for the keeper: queued
// in its channel, or taken and waiting behind the commit in flight
// (deferred, behind a barrier, or decided into the next batch); a sweep
// of absent pods that waits for the commit counts as one.
func QueuedRequests(p *Plugin) int { return len(p.keeper.reqs) + int(p.keeper.pipe.waiting.Load()) }

// Closing tells whether Close has begun (the keeper's stop is closed).
func Closing(p *Plugin) bool { return p.keeper.stopping() }

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

// Submitted is what the AddPod handler gets from the keeper: the
// in-memory decision (Addr or Err) at once, and Final, which waits for
// the durable outcome.
type Submitted struct {
	Addr  netip.Addr
	Err   error
	Final func(ctx context.Context) (netip.Addr, error)
}

// SubmitAllocation submits an allocation the way the AddPod handler does.
func SubmitAllocation(p *Plugin, id podmodel.ID) Submitted {
	return submitted(p.keeper.submit(&request{kind: reqAllocate, pod: id}))
}

// SubmitRelease submits a release the way the DeletePod handler does.
func SubmitRelease(p *Plugin, id podmodel.ID) Submitted {
	return submitted(p.keeper.submit(&request{kind: reqRelease, pod: id}))
}

func submitted(dec reply, final func(ctx context.Context) reply) Submitted {
	return Submitted{Addr: dec.addr, Err: dec.err, Final: func(ctx context.Context) (netip.Addr, error) {
		rep := final(ctx)
		return rep.addr, rep.err
	}}
}

// FamilyCount is the number of address families of the node.
func FamilyCount(p *Plugin) (n int) {
	p.read(func(st *addressing.State) { n = len(st.Families()) })
	return n
}

// MaxHeldRequests bounds the requests the keeper holds behind one stalled
// transaction: its queue, its deferred list, the stalled one and a
// barrier.
const MaxHeldRequests = queueLen + maxDeferred + 2

// WritesInFlight is the number of transactions the keeper handed to the
// store whose outcome it has not settled yet.
func WritesInFlight(p *Plugin) (n int) {
	return int(p.keeper.pipe.flightCount.Load())
}
