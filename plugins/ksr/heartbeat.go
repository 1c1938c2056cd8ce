package ksr

import (
	"context"
	"fmt"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	mirrormodel "github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// markerKey is the mirror marker's etcd key.
const markerKey = codec.KSRPrefix + mirrormodel.Key

// heartbeat is the leader's mirror marker writer, owned by the loop
// goroutine: due says a marker is to be written once the mirror is
// complete, last is the heartbeat of the newest marker written or read.
type heartbeat struct {
	due  bool
	last time.Time
}

// startBeats reads the marker a previous leader left, so that this one's
// heartbeats only move forward (the agents ignore a marker older than
// the newest they saw), and makes the first one due.
func (l *leader) startBeats(ctx context.Context) {
	l.beat.due = true
	kv, found, err := l.p.DB.Get(ctx, markerKey)
	if err != nil || !found {
		return
	}
	if m, err := mirrormodel.Parse(kv.Value); err == nil && m.Heartbeat.After(l.beat.last) {
		l.beat.last = m.Heartbeat
	}
}

// writeMarker writes the marker when one is due and the mirror is
// complete (a resync done, no changed object waiting), in a transaction
// fenced by the leadership.
func (l *leader) writeMarker(ctx context.Context) error {
	p := l.p
	if !l.beat.due || !p.mirror.valid() || p.dirty.len() > 0 {
		return nil
	}
	m := p.marker(l.beat.last)
	ok, err := p.DB.Txn(ctx, []kvdb.Cmp{l.lead.Fence()}, []kvdb.Op{kvdb.PutOp(markerKey, m.Encode())})
	switch {
	case err != nil:
		return fmt.Errorf("ksr: write the mirror marker: %w", err)
	case !ok:
		return errLostLead
	}
	l.beat.due, l.beat.last = false, m.Heartbeat
	p.status.setMarker(m)
	p.metrics.beats.Inc()
	return nil
}

// marker is the marker of the mirror now: its heartbeat after last.
func (p *Plugin) marker(last time.Time) mirrormodel.Marker {
	hb := p.clock.Now().UTC()
	if !hb.After(last) {
		hb = last.Add(time.Millisecond)
	}
	m := mirrormodel.Marker{Leader: string(p.identity), Pods: p.mirror.counts()[pod.Keyword], Heartbeat: hb,
		Interval: p.cfg.MirrorHeartbeat.String()}
	for _, r := range p.res {
		if r.keyword == pod.Keyword {
			m.ResourceVersion = r.informer.LastSyncResourceVersion()
		}
	}
	return m
}
