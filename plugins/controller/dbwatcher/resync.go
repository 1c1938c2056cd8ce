package dbwatcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/dbresources"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
)

// remoteResync lists every prefix once, mirrors the result into Local,
// pushes it as a DBResync and watches each prefix from its snapshot's
// next revision. Nothing is kept when the push is refused: the retry
// lists again rather than push a stale snapshot.
func (s *syncer) remoteResync(ctx context.Context) error {
	start := time.Now()
	s.stopWatch()
	kvs, revs, err := s.listAll(ctx)
	if err != nil {
		return err
	}
	state, raw, skipped := s.decodeAll(kvs, "etcd")
	kvs = nil // the decoded state and raw hold what is kept
	s.keepLastGood(ctx, state, raw)
	s.syncMirror(ctx, raw)
	if err := s.w.cfg.Loop.PushEventWait(ctx, &api.DBResync{KubeState: state.Clone()}); err != nil {
		return fmt.Errorf("push of the DB resync at revision %d: %w", slices.Max(revs), err)
	}
	s.w.stats.remoteResyncs.Add(1)
	s.state, s.remoteDone = state, true
	for i, st := range s.streams {
		st.reset(revs[i])
	}
	stopTimer(&s.local)
	s.log.Info("remote resync pushed", "revision", slices.Max(revs), "prefixes", len(s.streams), "keys", state.Len(),
		"skipped", skipped, "duration", time.Since(start))
	return s.startWatches(ctx, revs)
}

// listAll lists every stream's prefix, all at once (each is its own
// snapshot: the streams are independent): the keys of all, in the order
// of the streams, and the revision of each stream's snapshot.
func (s *syncer) listAll(ctx context.Context) ([]kvdb.KeyValue, []int64, error) {
	parts := make([][]kvdb.KeyValue, len(s.streams))
	revs := make([]int64, len(s.streams))
	errs := make([]error, len(s.streams))
	var wg sync.WaitGroup
	for i, st := range s.streams {
		wg.Go(func() {
			part, rev, err := s.w.remote.List(ctx, st.prefix)
			if err != nil {
				errs[i] = fmt.Errorf("list %q: %w", codec.KSRPrefix+st.prefix, err)
				return
			}
			parts[i], revs[i] = slices.DeleteFunc(part, func(kv kvdb.KeyValue) bool { return !st.wants(kv.Key) }), rev
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return slices.Concat(parts...), revs, nil
}

// startWatches watches each stream's prefix from revs[i]+1 and merges the
// watches into s.watch: one goroutine per watch relays its events in its
// order, and stops when stopWatch cancels them.
func (s *syncer) startWatches(ctx context.Context, revs []int64) error {
	wctx, cancel := context.WithCancel(ctx)
	merged := make(chan streamEvent)
	s.watch, s.cancelWatch = merged, cancel
	for i, st := range s.streams {
		ch, err := s.w.remote.Watch(wctx, st.prefix, revs[i]+1)
		if err != nil {
			s.stopWatch()
			return fmt.Errorf("watch %q from revision %d: %w", codec.KSRPrefix+st.prefix, revs[i]+1, err)
		}
		s.relays.Go(func() { relay(wctx, i, ch, merged) })
	}
	return nil
}

// relay passes stream i's watch events to out until ctx ends, then the
// end of the watch (closed) if it ended first.
func relay(ctx context.Context, i int, in <-chan kvdb.WatchEvent, out chan<- streamEvent) {
	for {
		var se streamEvent
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-in:
			se = streamEvent{i: i, ev: ev, closed: !ok}
		}
		select {
		case <-ctx.Done():
			return
		case out <- se:
		}
		if se.closed {
			return
		}
	}
}

// localFallback resyncs from the mirror when no remote resync has been
// pushed yet. An empty mirror is left alone: the loop waits for etcd.
func (s *syncer) localFallback(ctx context.Context) {
	if s.remoteDone {
		return
	}
	start := time.Now()
	kvs, rev, err := s.w.mirror.List(ctx, "")
	if err == nil && len(kvs) == 0 {
		s.log.Info("etcd not reached and the local mirror is empty: waiting for etcd",
			"delay-local-resync", s.w.cfg.DelayLocalResync, "mirror-prefix", s.w.cfg.MirrorPrefix)
		return
	}
	if err == nil {
		state, _, skipped := s.decodeAll(kvs, "mirror")
		err = s.w.cfg.Loop.PushEventWait(ctx, &api.DBResync{Local: true, KubeState: state})
		if err == nil {
			s.w.stats.localResyncs.Add(1)
			s.log.Info("etcd not reached: local resync pushed from the mirror", "mirror-revision", rev,
				"keys", state.Len(), "skipped", skipped, "duration", time.Since(start))
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	if errors.Is(err, api.ErrClosedController) {
		s.log.Error("local resync failed; the event loop is closed, no retry", "err", err)
		return
	}
	s.log.Warn("local resync failed; retrying", "retry-in", s.w.cfg.RetryInterval, "err", err)
	s.local = time.NewTimer(s.w.cfg.RetryInterval)
}

// keepLastGood gives each key of a known resource whose listed value does
// not decode (s.bad, from decodeAll) its last good value, as the watch
// does: the one last pushed (s.state), else the mirror's, if it decodes;
// raw keeps the mirror's bytes so that syncMirror leaves them. A key with
// no good value known stays out. A bad value is never a delete.
func (s *syncer) keepLastGood(ctx context.Context, state api.KubeStateData, raw map[string][]byte) {
	for _, b := range s.bad {
		value := s.state[b.keyword][b.key]
		if s.w.mirror != nil {
			if kv, found, err := s.w.mirror.Get(ctx, b.key); err == nil && found {
				if _, mv, err := dbresources.Decode(b.key, kv.Value); err == nil {
					raw[b.key] = kv.Value
					if value == nil {
						value = mv
					}
				}
			}
		}
		if value == nil {
			s.log.Warn("value does not decode and no good value of the key is known: left out", "key", b.key)
			continue
		}
		state.Apply(b.keyword, b.key, value)
		s.log.Warn("value does not decode; the key keeps its last good value", "key", b.key, "resource", b.keyword)
	}
}

// decodeAll builds the state of kvs with every known resource present
// (empty when it has no keys) and returns the raw values of the keys it
// kept. Keys of no known resource and values that do not decode are
// logged, counted and skipped; the latter are listed in s.bad.
func (s *syncer) decodeAll(kvs []kvdb.KeyValue, source string) (api.KubeStateData, map[string][]byte, int) {
	state := make(api.KubeStateData)
	for _, kw := range dbresources.Keywords() {
		state[kw] = make(api.KubeResourceData)
	}
	raw := make(map[string][]byte, len(kvs))
	skipped := 0
	s.bad = s.bad[:0]
	for i, d := range decodeParallel(kvs) {
		kv := kvs[i]
		if d.err != nil {
			skipped++
			msg := "key skipped: its value does not decode"
			if errors.Is(d.err, dbresources.ErrUnknownKey) {
				msg = "key skipped: no known resource"
			}
			s.log.Warn(msg, "source", source, "key", kv.Key, "revision", kv.Revision,
				"bytes", len(kv.Value), "err", d.err)
			res, known := dbresources.ByKey(kv.Key)
			if known {
				s.bad = append(s.bad, badKey{keyword: res.Keyword, key: kv.Key})
			}
			s.badValue(res.Keyword)
			continue
		}
		state.Apply(d.keyword, kv.Key, d.value)
		raw[kv.Key] = kv.Value
	}
	return state, raw, skipped
}

// decoded is dbresources.Decode's result for one key.
type decoded struct {
	keyword string
	value   proto.Message
	err     error
}

// parallelDecodeMin is the fewest keys worth decoding on several cores.
const parallelDecodeMin = 1024

// decodeParallel decodes kvs on up to GOMAXPROCS goroutines, each on its
// own slice of the keys and results, and returns when all are done:
// decoding is a pure function of each key and value (protojson costs
// about 10 µs a pod, so 100,000 pods are 1 s on one core). The caller,
// the watcher's goroutine, alone reads the results.
func decodeParallel(kvs []kvdb.KeyValue) []decoded {
	out := make([]decoded, len(kvs))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(kvs)/parallelDecodeMin))
	per := (len(kvs) + workers - 1) / max(workers, 1)
	var wg sync.WaitGroup
	for lo := 0; lo < len(kvs); lo += per {
		hi := min(lo+per, len(kvs))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				kw, value, err := dbresources.Decode(kvs[i].Key, kvs[i].Value)
				out[i] = decoded{keyword: kw, value: value, err: err}
			}
		})
	}
	wg.Wait()
	return out
}

// syncMirror makes the mirror hold exactly want, less the values the
// store cannot hold: each value larger than kvdb.MaxValueLen is logged,
// counted, removed from want and left out alone. Changed and missing keys
// are put, keys no longer wanted deleted, in transactions of at most
// kvdb.MaxTxnOps ops; a failed transaction is logged and the next ones
// still run. The mirror only serves a start without etcd, and the next
// remote resync tries again.
func (s *syncer) syncMirror(ctx context.Context, want map[string][]byte) {
	if s.w.mirror == nil {
		return
	}
	start := time.Now()
	have, _, err := s.w.mirror.List(ctx, "")
	if err != nil {
		s.log.Warn("mirror not updated: cannot list it", "err", err)
		return
	}
	for key, value := range want {
		if len(value) > kvdb.MaxValueLen {
			s.skipOversized(key, value)
			delete(want, key)
		}
	}
	ops, puts, deletes := mirrorOps(have, want)
	failed := 0
	for batch := range slices.Chunk(ops, kvdb.MaxTxnOps) {
		if _, err := s.w.mirror.Txn(ctx, nil, batch); err != nil {
			failed += len(batch)
			s.log.Warn("mirror update failed", "ops", len(batch), "first-key", batch[0].Key, "err", err)
		}
	}
	s.log.Debug("mirror updated", "keys", len(want), "puts", puts, "deletes", deletes, "failed-ops", failed,
		"duration", time.Since(start))
}

// skipOversized logs and counts a value the mirror cannot hold.
func (s *syncer) skipOversized(key string, value []byte) {
	s.w.stats.mirrorSkipped.Add(1)
	s.log.Warn("value left out of the mirror: larger than the store's limit", "key", key,
		"bytes", len(value), "limit", kvdb.MaxValueLen)
}

// mirrorOps returns the ops that turn have into want, sorted by key.
func mirrorOps(have []kvdb.KeyValue, want map[string][]byte) (ops []kvdb.Op, puts, deletes int) {
	seen := make(map[string]struct{}, len(have))
	for _, kv := range have {
		seen[kv.Key] = struct{}{}
		value, ok := want[kv.Key]
		switch {
		case !ok:
			ops = append(ops, kvdb.DeleteOp(kv.Key))
			deletes++
		case !bytes.Equal(value, kv.Value):
			ops = append(ops, kvdb.PutOp(kv.Key, value))
			puts++
		}
	}
	for key, value := range want {
		if _, ok := seen[key]; !ok {
			ops = append(ops, kvdb.PutOp(key, value))
			puts++
		}
	}
	slices.SortFunc(ops, func(a, b kvdb.Op) int { return strings.Compare(a.Key, b.Key) })
	return ops, puts, deletes
}
