package dbwatcher

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
)

// handleEvent turns one watch event into a KubeStateChange: it drops stale
// and no-op events, updates the state and the mirror, then pushes.
func (s *syncer) handleEvent(ctx context.Context, st *stream, ev kvdb.WatchEvent) {
	if !st.wants(ev.Key) {
		return // a longer key under an exact key's name: not read
	}
	if st.stale(ev) {
		s.w.stats.droppedStale.Add(1)
		s.log.Debug("stale watch event dropped", "key", ev.Key, "revision", ev.Revision,
			"snapshot-revision", st.snapRev, "last-revision", st.lastRev)
		return
	}
	st.processed(ev)
	resource, value, ok := s.decodeEvent(ev)
	if !ok {
		return
	}
	prev := s.state[resource][ev.Key]
	if (prev == nil && value == nil) || (prev != nil && value != nil && proto.Equal(prev, value)) {
		s.log.Debug("watch event changes nothing", "key", ev.Key, "revision", ev.Revision)
		return
	}
	s.state.Apply(resource, ev.Key, value)
	s.mirrorChange(ctx, ev.Key, value != nil, ev.Value)
	change := &api.KubeStateChange{Key: ev.Key, Resource: resource, PrevValue: prev, NewValue: value}
	if err := s.w.cfg.Loop.PushEventWait(ctx, change); err != nil {
		// The loop missed this change (the watcher stops, or the loop
		// closed): only a resync can catch it up.
		s.failed(ctx, "push of "+change.String()+" refused", err)
		return
	}
	s.w.stats.changes.Add(1)
	s.log.Debug("change pushed", "event", change.String(), "revision", ev.Revision)
}

// decodeEvent returns the resource of ev's key and its new value (nil for
// a delete). A value that does not decode is never a delete: it is logged
// and counted, and the key keeps its last good value in the state and in
// the mirror (ok false), so that one bad write cannot release a running
// pod's address. A key of no known resource is skipped (ok false).
func (s *syncer) decodeEvent(ev kvdb.WatchEvent) (resource string, value proto.Message, ok bool) {
	res, known := dbresources.ByKey(ev.Key)
	if !known {
		if ev.Type == kvdb.EventPut {
			s.badValue("")
			s.log.Warn("key of no known resource skipped", "key", ev.Key, "revision", ev.Revision)
		}
		return "", nil, false
	}
	if ev.Type == kvdb.EventDelete {
		return res.Keyword, nil, true
	}
	_, value, err := dbresources.Decode(ev.Key, ev.Value)
	if err != nil {
		s.badValue(res.Keyword)
		_, known := s.state[res.Keyword][ev.Key]
		s.log.Warn("value does not decode; the key keeps its last good value", "key", ev.Key,
			"resource", res.Keyword, "revision", ev.Revision, "bytes", len(ev.Value), "has-last-good", known, "err", err)
		return "", nil, false
	}
	return res.Keyword, value, true
}

// mirrorChange puts (present) or deletes key in the mirror; an error is
// logged: the next remote resync repairs the mirror. A value larger than
// kvdb.MaxValueLen is logged, counted and left out: the key is deleted
// from the mirror rather than left with an older value.
func (s *syncer) mirrorChange(ctx context.Context, key string, present bool, raw []byte) {
	if s.w.mirror == nil {
		return
	}
	if present && len(raw) > kvdb.MaxValueLen {
		s.skipOversized(key, raw)
		present = false
	}
	var err error
	if present {
		err = s.w.mirror.Put(ctx, key, raw)
	} else {
		_, err = s.w.mirror.Delete(ctx, key)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn("mirror update failed", "key", key, "err", err)
	}
}
