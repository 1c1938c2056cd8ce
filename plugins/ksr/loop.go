package ksr

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
)

// Retry bounds after a failed campaign or a failed write.
const (
	minRetry = 100 * time.Millisecond
	maxRetry = 5 * time.Second
)

// run is the loop goroutine: it waits for the informers, then campaigns,
// leads until the leadership is lost, and campaigns again, until ctx ends.
func (p *Plugin) run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), p.synced()...) {
		return
	}
	p.status.setSynced()
	p.report(health.OK, nil)
	p.Log.Info("informers synced; campaigning", "election", p.cfg.ElectionPrefix, "identity", string(p.identity))
	backoff := minRetry
	for ctx.Err() == nil {
		lead, err := p.Election.Campaign(ctx, p.cfg.ElectionPrefix, p.identity, p.cfg.ElectionTTL)
		if err != nil {
			if ctx.Err() == nil {
				p.Log.Warn("campaign failed; retrying", "retry-in", backoff, "err", err)
				p.sleep(ctx, backoff)
				backoff = min(2*backoff, maxRetry)
			}
			continue
		}
		backoff = minRetry
		p.lead(ctx, lead)
		p.resign(lead)
	}
}

// synced are the informers' HasSynced functions.
func (p *Plugin) synced() []cache.InformerSynced {
	out := make([]cache.InformerSynced, len(p.res))
	for i, r := range p.res {
		out[i] = r.informer.HasSynced
	}
	return out
}

// sleep waits d or until ctx ends.
func (p *Plugin) sleep(ctx context.Context, d time.Duration) {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

// resign gives the lead up (a clean stop hands it over at once).
func (p *Plugin) resign(lead kvdb.Leadership) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := lead.Resign(ctx); err != nil {
		p.Log.Debug("resign failed; the lease expires by itself", "err", err)
	}
}

// leader is the state of one leadership, owned by the loop goroutine.
type leader struct {
	p        *Plugin
	lead     kvdb.Leadership
	resync   bool             // a resync is due
	retry    <-chan time.Time // armed after a failure; nil when idle
	backoff  time.Duration
	beat     heartbeat
	releaseT <-chan time.Time // the next node ID due; nil when none
}

// lead writes for as long as lead holds: a resync first, then the changed
// objects as they come, a resync every resync period or on request, and
// the node ID releases when they are due.
func (p *Plugin) lead(ctx context.Context, lead kvdb.Leadership) {
	p.Log.Info("leading: this replica writes the Kubernetes state to etcd")
	p.metrics.leads.Inc()
	p.metrics.leader.Set(1)
	p.status.setLeading(true)
	defer func() {
		p.metrics.leader.Set(0)
		p.status.setLeading(false)
	}()
	stopIPAM := p.startNodeIPAM(ctx, lead)
	defer stopIPAM()
	stopPools := p.startPoolBlocks(ctx, lead)
	defer stopPools()
	l := &leader{p: p, lead: lead, resync: true, backoff: minRetry}
	l.startBeats(ctx)
	ticker := p.clock.NewTicker(p.cfg.ResyncPeriod)
	defer ticker.Stop()
	beats := p.clock.NewTicker(p.cfg.MirrorHeartbeat)
	defer beats.Stop()
	for {
		if err := l.step(ctx); err != nil {
			p.Log.Warn("stepping down: "+err.Error(), "identity", string(p.identity))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-lead.Done():
			p.Log.Warn("leadership lost (lease expired or leader key gone); standing by")
			return
		case <-p.dirty.signal:
		case <-ticker.C():
			l.resync = true
		case <-beats.C():
			l.beat.due = true
		case <-p.resyncNow:
			l.resync = true
		case <-l.retry:
			l.retry = nil
		case <-l.releaseT:
			l.releaseT = nil
			l.releases(ctx)
		case <-p.nodeGone:
			l.releases(ctx)
		}
	}
}

// step does the work that is due: a resync (which also checks the node
// IDs), else the dirty objects. It returns an error only when the lead is
// lost; other failures arm the retry.
func (l *leader) step(ctx context.Context) error {
	if l.retry != nil {
		return nil
	}
	var err error
	switch {
	case l.resync || !l.p.mirror.valid():
		l.p.dirty.take() // the resync covers them
		err = l.p.resyncOnce(ctx, l.lead.Fence())
		if err == nil {
			l.resync = false
			l.releases(ctx)
		}
	case l.p.dirty.len() > 0:
		err = l.p.mirror.sync(ctx, l.lead.Fence(), l.p.dirty.take())
	}
	if err == nil {
		err = l.writeMarker(ctx)
	}
	return l.settle(err)
}

// settle turns a failure into a retry, or into an error when the lead is
// lost.
func (l *leader) settle(err error) error {
	switch {
	case err == nil:
		l.backoff = minRetry
		l.p.report(health.OK, nil)
		return nil
	case errors.Is(err, errLostLead):
		return err
	}
	l.p.Log.Error("writing to etcd failed; resyncing after a pause", "retry-in", l.backoff, "err", err)
	l.p.report(health.Error, err)
	l.resync = true
	t := l.p.clock.NewTimer(l.backoff)
	l.retry = t.C()
	l.backoff = min(2*l.backoff, maxRetry)
	return nil
}

// releases frees the node IDs that are due and arms the timer for the
// next check: the earliest due ID, or, while a past-due ID is blocked by
// its agent, blockedRecheck from now (whichever comes first).
func (l *leader) releases(ctx context.Context) {
	pending, err := l.p.releaser.check(ctx, l.lead.Fence())
	if err != nil {
		l.p.Log.Error("node ID release check failed; checking again at the next resync", "err", err)
		return
	}
	l.p.status.setPending(pending)
	l.releaseT = nil
	now := l.p.clock.Now()
	var next time.Time
	for _, pr := range pending {
		due := pr.Due
		if pr.Blocked != "" {
			due = now.Add(l.p.blockedRecheck())
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	if !next.IsZero() {
		l.releaseT = l.p.clock.NewTimer(next.Sub(now)).C()
	}
}

// blockedRecheck is how often a past-due node ID blocked by its agent is
// checked again: the grace period, at most 30s.
func (p *Plugin) blockedRecheck() time.Duration { return min(p.cfg.NodeIDGracePeriod, 30*time.Second) }

// resyncOnce runs one mark-and-sweep resync and records its outcome.
func (p *Plugin) resyncOnce(ctx context.Context, fence kvdb.Cmp) error {
	start := p.clock.Now()
	fixes, err := p.mirror.resync(ctx, fence)
	if err != nil {
		p.metrics.resyncs.WithLabelValues("error").Inc()
		return err
	}
	counts := p.mirror.counts()
	p.status.setResync(start, fixes, counts) // before the counters: a reader of both sees them agree
	for res, kinds := range fixes {
		for kind, n := range kinds {
			p.metrics.fixes.WithLabelValues(res, kind).Add(float64(n))
		}
	}
	p.metrics.resyncs.WithLabelValues("ok").Inc()
	p.Log.Info("resync done", "fixed", fixes.Total(), "fixes", fixes, "mirrored", counts,
		"took", p.clock.Since(start).Round(time.Millisecond))
	return nil
}
