package ipam

import (
	"context"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Test hooks, compiled into the tests only.

// QueuedRequests is the number of requests waiting for the keeper: queued
// in its channel, or taken and waiting behind the commit in flight
// (deferred, behind a barrier, or decided into the next batch); a sweep
// of absent pods that waits for the commit counts as one.
func QueuedRequests(p *Plugin) int { return p.keeper.QueuedRequests() }

// Closing tells whether Close has begun (the keeper's stop is closed).
func Closing(p *Plugin) bool { return p.keeper.Closing() }

// Clock is the keeper's time source.
type Clock = keeper.Clock

// UseClock replaces the system clock.
func UseClock(c Clock) Option { return func(p *Plugin) { p.clock = c } }

// AbsentReleases counts the addresses released after the grace period.
func AbsentReleases(p *Plugin) prometheus.Collector {
	return p.metrics.keeper.AbsentReleases()
}

// AllocationsOf is the reply of GET /contiv/v1/ipam/allocations.
func AllocationsOf(p *Plugin) Allocations { return p.allocations() }

// KubeStateIsLive tells whether the keeper's view of the Kubernetes pods
// comes from etcd (a remote DB resync), not from the local mirror.
func KubeStateIsLive(p *Plugin) bool { return p.keeper.KubeStateLive() }

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
	return submitted(p.keeper.Submit(&keeper.Request{Kind: keeper.ReqAllocate, Pod: id}))
}

// SubmitRelease submits a release the way the DeletePod handler does.
func SubmitRelease(p *Plugin, id podmodel.ID) Submitted {
	return submitted(p.keeper.Submit(&keeper.Request{Kind: keeper.ReqRelease, Pod: id}))
}

func submitted(dec keeper.Reply, final func(ctx context.Context) keeper.Reply) Submitted {
	return Submitted{Addr: dec.Addr, Err: dec.Err, Final: func(ctx context.Context) (netip.Addr, error) {
		rep := final(ctx)
		return rep.Addr, rep.Err
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
const MaxHeldRequests = keeper.MaxHeldRequests

// WritesInFlight is the number of transactions the keeper handed to the
// store whose outcome it has not settled yet.
func WritesInFlight(p *Plugin) int { return p.keeper.WritesInFlight() }

// Released is contiv_ipam_pod_ips_released_total{reason}.
func Released(p *Plugin, reason string) prometheus.Collector {
	return p.metrics.keeper.Released(reason)
}

// CandidateCount is the number of release candidates and why they are
// not released ("": they are, at the end of their grace period).
func CandidateCount(p *Plugin) (int, string) {
	c, blocked := p.keeper.Candidates()
	return len(c), blocked
}
