package dbwatcher

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// syncer is the state of the run goroutine, which alone touches it: every
// resync and every watch event is processed there, one at a time, so the
// loop receives events in the order etcd made the changes.
type syncer struct {
	w   *Watcher
	log *slog.Logger

	// state is the Kubernetes state as last pushed to the loop.
	state api.KubeStateData
	// bad are the keys of known resources whose listed values did not
	// decode, from decodeAll to keepLastGood.
	bad []badKey
	// snapRev is the revision of the last remote resync's List; lastRev the
	// highest revision processed since, and atLast the keys processed at
	// lastRev (the ops of one etcd transaction share a revision).
	snapRev int64
	lastRev int64
	atLast  map[string]struct{}

	watch       <-chan kvdb.WatchEvent // nil while not watching
	cancelWatch context.CancelFunc

	remoteDone bool // a remote resync has been pushed
	pending    bool // a remote resync is due

	retry *time.Timer // armed after a failure; nil otherwise
	local *time.Timer // the local fallback; nil once done or disabled
}

func newSyncer(w *Watcher) *syncer {
	return &syncer{w: w, log: w.cfg.Log, atLast: map[string]struct{}{}}
}

// run processes requests, timers and watch events until ctx ends.
func (s *syncer) run(ctx context.Context) {
	defer s.log.Info("DB watcher stopped")
	defer s.stopWatch()
	defer stopTimer(&s.retry)
	defer stopTimer(&s.local)
	if s.w.mirror != nil && s.w.cfg.DelayLocalResync > 0 {
		s.local = time.NewTimer(s.w.cfg.DelayLocalResync)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.w.resyncReq:
			s.pending = true
		case <-timerC(s.retry):
			s.retry = nil
			s.pending = true
		case <-timerC(s.local):
			s.local = nil
			s.localFallback(ctx)
		case ev, ok := <-s.watch:
			if !ok {
				s.watchClosed(ctx)
				break
			}
			s.handleEvent(ctx, ev)
		}
		if s.pending && ctx.Err() == nil {
			s.tryRemoteResync(ctx)
		}
	}
}

// tryRemoteResync runs the pending remote resync once etcd has connected,
// and arranges a retry when it fails.
func (s *syncer) tryRemoteResync(ctx context.Context) {
	if !s.w.connected.Load() {
		s.log.Debug("remote resync waits for the first etcd connection")
		return
	}
	s.pending = false
	stopTimer(&s.retry)
	s.takeRequests()
	if err := s.remoteResync(ctx); err != nil {
		s.failed(ctx, "remote resync failed", err)
	}
}

// takeRequests takes a resync request made before this resync begins: the
// resync serves it (its List is later), so it does not run another one.
// Two callers asking for one reason (the store closed the watch and
// reported a replacement) get one resync.
func (s *syncer) takeRequests() {
	select {
	case <-s.w.resyncReq:
	default:
	}
}

// failed logs err and, unless the watcher stops or the loop is closed,
// schedules a remote resync after the retry interval.
func (s *syncer) failed(ctx context.Context, msg string, err error) {
	s.stopWatch()
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, api.ErrClosedController):
		s.log.Error(msg+"; the event loop is closed, no retry", "err", err)
		return
	}
	s.log.Warn(msg+"; retrying", "retry-in", s.w.cfg.RetryInterval, "err", err)
	if s.retry == nil {
		s.retry = time.NewTimer(s.w.cfg.RetryInterval)
	}
}

// watchClosed handles the end of the watch channel: unless the watcher is
// stopping, the watch broke (compaction, a slow consumer, etcd restart) and
// only a fresh List can tell what was missed.
func (s *syncer) watchClosed(ctx context.Context) {
	s.stopWatch()
	if ctx.Err() != nil {
		return
	}
	s.log.Warn("watch closed; resyncing from etcd", "last-revision", s.lastRev)
	s.pending = true
}

func (s *syncer) stopWatch() {
	if s.cancelWatch != nil {
		s.cancelWatch()
	}
	s.watch, s.cancelWatch = nil, nil
}

// stale reports whether ev was already processed: it is part of the last
// snapshot, older than the last processed revision, or a key already seen
// at that revision.
func (s *syncer) stale(ev kvdb.WatchEvent) bool {
	switch {
	case ev.Revision <= s.snapRev, ev.Revision < s.lastRev:
		return true
	case ev.Revision == s.lastRev:
		_, seen := s.atLast[ev.Key]
		return seen
	}
	return false
}

// processed records ev's key and revision for stale.
func (s *syncer) processed(ev kvdb.WatchEvent) {
	if ev.Revision > s.lastRev {
		s.lastRev = ev.Revision
		clear(s.atLast)
	}
	s.atLast[ev.Key] = struct{}{}
}

// timerC returns t's channel, or nil (blocks forever) for no timer.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// badKey is a key of a known resource whose value does not decode.
type badKey struct{ keyword, key string }
