package ipam

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/netip"
	"reflect"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
)

// The status record (package agentstatus) of this node in etcd.
//
// Policy: once the first resync has run (the addressing is known, or IPAM
// waits for this node's pod CIDR), the publisher writes the record when
// its content changed since the last write (Updated aside), and at the
// latest two periods after the last write, so that a record is never
// older than three periods (agentstatus.Status.Stale) while its agent
// runs. It looks at the content every period, and at the readiness every
// second: a readiness change is written within a second. A failed write is
// logged (the first, then at most one a minute, then the recovery) and
// tried again at the next look; it never stops the agent. Close stops the
// publisher and deletes the record (best effort, within
// statusDeleteTimeout).
//
// Owner: the publisher's goroutine (run) alone snapshots, writes and
// keeps what it last wrote. It never runs in the event loop: its snapshot
// asks the keeper (Inspect, Allocations, Candidates: requests served on
// the keeper's goroutine) and reads the plugin's atomics.

const (
	// statusReadinessCheck is how often the publisher looks at readiness.
	statusReadinessCheck = time.Second
	// statusDeleteTimeout bounds the delete of the record at Close.
	statusDeleteTimeout = 2 * time.Second
	// statusErrorLogEvery rate-limits the logs of failing writes.
	statusErrorLogEvery = time.Minute
)

// statusPublisher writes this node's agentstatus record; see above.
type statusPublisher struct {
	p      *Plugin
	db     kvdb.Broker
	period time.Duration
	log    *slog.Logger
	now    func() time.Time

	stop context.CancelFunc
	done chan struct{}

	// Owned by run.
	last      *agentstatus.Status // the last record written (nil: none)
	lastWrite time.Time
	failing   int       // writes failed since the last success
	lastLog   time.Time // the last log of a failure
}

// newStatusPublisher returns the publisher of p's record, or nil when
// the record is off (no StatusDB, statusPublishPeriod 0).
func newStatusPublisher(p *Plugin) *statusPublisher {
	if p.StatusDB == nil || p.cfg.StatusPublishPeriod <= 0 {
		return nil
	}
	return &statusPublisher{p: p, db: p.StatusDB, period: p.cfg.StatusPublishPeriod, log: p.Log, now: time.Now}
}

// start runs the publisher's goroutine.
func (s *statusPublisher) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		s.run(ctx)
	}()
}

// halt stops the goroutine; a write in flight ends with its ctx. The
// caller then waits with wait: the keeper must be closed in between, so
// that a keeper call of the snapshot cannot hold the goroutine.
func (s *statusPublisher) halt() { s.stop() }

// wait waits for the goroutine and deletes the record (best effort).
func (s *statusPublisher) wait() {
	<-s.done
	node := s.p.ServiceLabel.GetAgentLabel()
	if node == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusDeleteTimeout)
	defer cancel()
	if _, err := s.db.Delete(ctx, agentstatus.Key(node)); err != nil {
		s.log.Warn("could not delete the agent status record; readers will see it stale", "key", agentstatus.Key(node), "error", err)
	}
}

// run looks at readiness every second and at the content every period.
func (s *statusPublisher) run(ctx context.Context) {
	tick := time.NewTicker(min(statusReadinessCheck, s.period))
	defer tick.Stop()
	var lastLook time.Time
	var lookedReady bool // the readiness at lastLook
	for {
		now := s.now()
		ready, resynced := s.p.statusReady()
		due := lastLook.IsZero() || now.Sub(lastLook) >= s.period || ready != lookedReady
		if resynced && due && s.publish(ctx, now) {
			lastLook, lookedReady = now, ready
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// publish writes the record if it changed or is due; false when there is
// no record to write yet (no node ID).
func (s *statusPublisher) publish(ctx context.Context, now time.Time) bool {
	st, ok := s.snapshot(now)
	if !ok || ctx.Err() != nil {
		return false
	}
	if s.last != nil && sameStatus(s.last, st) && now.Sub(s.lastWrite) < 2*s.period-s.period/10 {
		return true
	}
	b, err := st.Encode()
	if err != nil {
		s.log.Error("agent status record not valid, not written", "error", err)
		return true
	}
	wctx, cancel := context.WithTimeout(ctx, min(max(s.period, time.Second), 10*time.Second))
	err = s.db.Put(wctx, agentstatus.Key(st.Node), b)
	cancel()
	if err != nil {
		s.failed(now, err)
		return true
	}
	if s.failing > 0 {
		s.log.Info("agent status record written again", "key", agentstatus.Key(st.Node), "failed-writes", s.failing)
		s.failing = 0
	}
	s.last, s.lastWrite = st, now
	return true
}

// failed logs a failed write: the first, then at most one a minute.
func (s *statusPublisher) failed(now time.Time, err error) {
	s.failing++
	if errors.Is(err, context.Canceled) {
		return // Close
	}
	if s.failing == 1 || now.Sub(s.lastLog) >= statusErrorLogEvery {
		s.lastLog = now
		s.log.Warn("could not write the agent status record; trying again next period",
			"error", err, "failed-writes", s.failing, "period", s.period)
	}
}

// sameStatus compares two records, Updated aside.
func sameStatus(a, b *agentstatus.Status) bool {
	x, y := *a, *b
	x.Updated, y.Updated = time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

// snapshot builds the record; false before the node has an ID or once
// the keeper is closing.
func (s *statusPublisher) snapshot(now time.Time) (*agentstatus.Status, bool) {
	p := s.p
	node, id := p.ServiceLabel.GetAgentLabel(), p.NodeSync.GetNodeID()
	if node == "" || id == 0 || p.keeper.Closing() {
		return nil, false
	}
	ready, _ := p.statusReady()
	st := &agentstatus.Status{Version: agentstatus.Version, Node: node, NodeID: id, Ready: ready,
		Pools: []agentstatus.Pool{}, Updated: now.UTC(), PeriodSeconds: periodSeconds(s.period)}
	if p.REST != nil {
		st.REST = p.REST.AdvertiseURL(p.thisNodeIP())
	}
	p.keeper.Inspect(func(pools []PoolStats, external bool) {
		for _, ps := range pools {
			pfx, err := netip.ParsePrefix(ps.CIDR)
			if err != nil {
				continue
			}
			fam := 4
			if pfx.Addr().Is6() {
				fam = 6
			}
			used, total := ps.Assigned+ps.Cooldown+ps.Excluded, ps.Total
			if external {
				// The keeper counts the assigned addresses only: the
				// total is the prefix's, less network and broadcast.
				total = prefixHosts(pfx)
			}
			total = max(total, used)
			st.Pools = append(st.Pools, agentstatus.Pool{Name: ps.CIDR, Family: fam, Prefix: ps.CIDR, Used: used, Total: total})
		}
	})
	for _, al := range p.keeper.Allocations() {
		if al.Owner == "" {
			st.Pods++
		}
	}
	cands, _ := p.keeper.Candidates()
	st.ReleaseCandidates = len(cands)
	return st, true
}

// prefixHosts is the number of addresses of pfx less two (network and
// broadcast), capped at the largest uint64.
func prefixHosts(pfx netip.Prefix) uint64 {
	bits := pfx.Addr().BitLen() - pfx.Bits()
	if bits >= 64 {
		return math.MaxUint64
	}
	n := uint64(1) << bits
	return n - min(n, 2)
}

// periodSeconds is the period in whole seconds, at least 1.
func periodSeconds(d time.Duration) int {
	return int(max(1, (d+time.Second-1)/time.Second))
}

// statusReady tells whether IPAM is ready (as it reports to the health
// plugin) and whether a resync has run.
func (p *Plugin) statusReady() (ready, resynced bool) {
	st, w := p.st.Load(), p.waiting.Load()
	resynced = st != nil || w != nil
	return st != nil && w == nil && p.keeper.StoreFailing() == nil, resynced
}

// thisNodeIP is this node's first management address in Kubernetes
// (InternalIP or ExternalIP), or the zero Addr.
func (p *Plugin) thisNodeIP() netip.Addr {
	n := p.NodeSync.GetAllNodes()[p.ServiceLabel.GetAgentLabel()]
	if n == nil {
		return netip.Addr{}
	}
	for _, ip := range n.MgmtIPAddresses {
		if a, ok := addressing.ToAddr(ip); ok && a.IsValid() {
			return a
		}
	}
	return netip.Addr{}
}
