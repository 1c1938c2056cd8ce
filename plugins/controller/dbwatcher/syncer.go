package dbwatcher

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
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
	// streams are the lists and watches, one per prefix (cfg.Prefixes),
	// in that order.
	streams []*stream

	watch       <-chan streamEvent // the streams' watches merged; nil while not watching
	cancelWatch context.CancelFunc
	relays      sync.WaitGroup // the goroutines that merge the watches

	remoteDone bool // a remote resync has been pushed
	pending    bool // a remote resync is due

	retry *time.Timer // armed after a failure; nil otherwise
	local *time.Timer // the local fallback; nil once done or disabled
}

// stream is the list and watch of one prefix. Each watch delivers its
// prefix's changes in revision order; watches of different prefixes are
// not ordered with each other, so revisions are tracked per stream.
type stream struct {
	prefix string
	// exact: prefix is one key (it does not end with "/"): the list and
	// the watch keep that key alone (etcd's are by prefix).
	exact bool
	// snapRev is the revision of the last remote resync's List of prefix;
	// lastRev the highest revision processed since, and atLast the keys
	// processed at lastRev (the ops of one etcd transaction share a
	// revision).
	snapRev int64
	lastRev int64
	atLast  map[string]struct{}
}

// streamEvent is one event of stream i's watch; closed says the watch
// ended (ev is zero).
type streamEvent struct {
	i      int
	ev     kvdb.WatchEvent
	closed bool
}

func newSyncer(w *Watcher) *syncer {
	s := &syncer{w: w, log: w.cfg.Log}
	for _, p := range w.cfg.Prefixes {
		s.streams = append(s.streams, &stream{prefix: p, exact: p != "" && !strings.HasSuffix(p, "/"), atLast: map[string]struct{}{}})
	}
	return s
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
		case se := <-s.watch:
			if se.closed {
				s.watchClosed(ctx, s.streams[se.i])
				break
			}
			s.handleEvent(ctx, s.streams[se.i], se.ev)
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

// watchClosed handles the end of a stream's watch: unless the watcher is
// stopping, the watch broke (compaction, a slow consumer, etcd restart)
// and only a fresh List can tell what was missed. Every stream is listed
// again: the resync is one state.
func (s *syncer) watchClosed(ctx context.Context, st *stream) {
	s.stopWatch()
	if ctx.Err() != nil {
		return
	}
	s.log.Warn("watch closed; resyncing from etcd", "prefix", st.prefix, "last-revision", st.lastRev)
	s.pending = true
}

// stopWatch ends every watch and waits for their relays.
func (s *syncer) stopWatch() {
	if s.cancelWatch != nil {
		s.cancelWatch()
	}
	s.relays.Wait()
	s.watch, s.cancelWatch = nil, nil
}

// wants tells whether key is one of the stream's.
func (st *stream) wants(key string) bool { return !st.exact || key == st.prefix }

// stale reports whether ev was already processed: it is part of the
// stream's last snapshot, older than its last processed revision, or a
// key already seen at that revision.
func (st *stream) stale(ev kvdb.WatchEvent) bool {
	switch {
	case ev.Revision <= st.snapRev, ev.Revision < st.lastRev:
		return true
	case ev.Revision == st.lastRev:
		_, seen := st.atLast[ev.Key]
		return seen
	}
	return false
}

// processed records ev's key and revision for stale.
func (st *stream) processed(ev kvdb.WatchEvent) {
	if ev.Revision > st.lastRev {
		st.lastRev = ev.Revision
		clear(st.atLast)
	}
	st.atLast[ev.Key] = struct{}{}
}

// reset starts the stream again from the snapshot at rev.
func (st *stream) reset(rev int64) {
	st.snapRev, st.lastRev = rev, rev
	clear(st.atLast)
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
