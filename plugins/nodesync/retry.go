package nodesync

import (
	"sync"
	"time"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// transientError: the claim failed because etcd did not answer (down,
// timed out). The agent does not stop: it stays without an ID, unready,
// and claims again (see retryClaim).
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Retry delays of a claim that failed because etcd did not answer.
const (
	firstClaimRetry = 500 * time.Millisecond
	maxClaimRetry   = 30 * time.Second
)

// claimRetry schedules ClaimRetry events; its timer is stopped by Close.
type claimRetry struct {
	mu     sync.Mutex
	timer  *time.Timer
	delay  time.Duration
	closed bool
}

// retryClaim logs the failed claim, reports the plugin unready with the
// reason and pushes a ClaimRetry after a growing delay. A remote DB
// resync (etcd back) claims again earlier.
func (p *Plugin) retryClaim(cause *transientError) {
	r := &p.retry
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.delay = min(max(2*r.delay, firstClaimRetry), maxClaimRetry)
	p.Log.Warn("node ID claim failed: etcd did not answer; trying again", "node", p.name, "in", r.delay, "error", cause.err)
	p.reportHealth(health.Init, cause)
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timer = time.AfterFunc(r.delay, func() {
		if p.EventLoop == nil {
			return
		}
		if err := p.EventLoop.PushEvent(&ClaimRetry{}); err != nil {
			p.Log.Error("cannot push a node ID claim retry", "error", err)
		}
	})
}

// claimed resets the retry delay and reports the plugin ready.
func (p *Plugin) claimed() {
	r := &p.retry
	r.mu.Lock()
	r.delay = 0
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.mu.Unlock()
	p.reportHealth(health.OK, nil)
}

// stopRetry cancels a scheduled retry for good.
func (p *Plugin) stopRetry() {
	r := &p.retry
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
}

// reportHealth tells the health plugin, when there is one.
func (p *Plugin) reportHealth(s health.State, err error) {
	if p.StatusCheck != nil {
		p.StatusCheck.ReportStateChange(p.String(), s, err)
	}
}

// ClaimRetryName is the name of ClaimRetry events.
const ClaimRetryName = "Node ID Claim Retry"

// ClaimRetry makes every handler resync after a node ID claim failed
// because etcd did not answer: nodesync claims again, and the handlers
// that need the ID (ipam) initialise once it is there.
type ClaimRetry struct{}

var _ api.Event = (*ClaimRetry)(nil)

// GetName returns "Node ID Claim Retry".
func (ev *ClaimRetry) GetName() string { return ClaimRetryName }

// String returns the name.
func (ev *ClaimRetry) String() string { return ClaimRetryName }

// Method is UpstreamResync: every handler resyncs with the current state.
func (ev *ClaimRetry) Method() api.EventMethodType { return api.UpstreamResync }

// IsBlocking is false.
func (ev *ClaimRetry) IsBlocking() bool { return false }

// Done does nothing.
func (ev *ClaimRetry) Done(error) {}
