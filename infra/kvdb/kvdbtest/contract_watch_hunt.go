package kvdbtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// EnvWatchRounds names the environment variable that sets how many rounds
// WatchesCreatedDuringWrites runs (default DefaultWatchRounds). A long
// hunt for a watch that misses events:
//
//	KVDBTEST_WATCH_ROUNDS=20000 go test -race -run 'TestContract/WatchesCreatedDuringWrites' ./infra/kvdb/etcd/
const EnvWatchRounds = "KVDBTEST_WATCH_ROUNDS"

// DefaultWatchRounds keeps the test within a few seconds per store.
const DefaultWatchRounds = 300

// Shape of one round of WatchesCreatedDuringWrites.
const (
	// huntWrites are the writes of one round; every fourth is a two-key
	// transaction (two events at one revision).
	huntWrites = 12
	// huntParallel rounds run at once, so that watches are created and
	// cancelled on one connection while others deliver.
	huntParallel = 8
	// huntEnd is the last key a round writes, once its watches exist: a
	// watch is complete once it has delivered it.
	huntEnd = "~end"
)

// watchRounds reads EnvWatchRounds.
func watchRounds(t *testing.T) int {
	v, ok := os.LookupEnv(EnvWatchRounds)
	if !ok {
		return DefaultWatchRounds
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count of rounds", EnvWatchRounds, v)
	}
	return n
}

// testWatchesDuringWrites creates watches while their prefix is written,
// round after round, huntParallel rounds at a time. Each round has three
// watches, created while a writer writes the round's prefix from both
// clients:
//
//   - "list": List, then Watch from its rev+1 (the dbwatcher's way);
//   - "past": Watch from a revision taken before the writes began;
//   - "now": Watch from 0 (from now).
//
// Once the writes are done and every watch exists, an end key is written.
// Each watch must deliver, in revision order and exactly once, every write
// at or after its start revision up to the end key; for "now", a run of
// the last writes that holds every write started after Watch returned. The
// end key is what makes silence measurable: a watch created after the
// writer's last write rightly delivers none of the writes (under load the
// writer often finishes first), but it must deliver the end key.
func testWatchesDuringWrites(t *testing.T, a, b kvdb.Broker) {
	rounds := watchRounds(t)
	start := time.Now()
	var (
		mu       sync.Mutex
		failures []string
		watches  atomic.Int64
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for range huntParallel {
		wg.Go(func() {
			for {
				r := int(next.Add(1)) - 1
				if r >= rounds {
					return
				}
				errs := huntRound(t.Context(), a, b, fmt.Sprintf("hunt/%05d/", r))
				watches.Add(3)
				if len(errs) > 0 {
					mu.Lock()
					failures = append(failures, errs...)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d rounds, %d watches created during writes, %d failed, in %s",
		rounds, watches.Load(), len(failures), time.Since(start).Round(time.Millisecond))
	if len(failures) > 0 {
		t.Errorf("%d watches missed, repeated or reordered events; the first:\n%s",
			len(failures), strings.Join(failures[:min(len(failures), 5)], "\n"))
	}
}

// huntWatch is one watch of a round and what it must deliver.
type huntWatch struct {
	name    string
	fromRev int64 // 0: from now
	ch      <-chan kvdb.WatchEvent
	// startedBefore is how many writes had begun when Watch returned
	// (for "now": the later ones must all be delivered).
	startedBefore int64
	got           []kvdb.WatchEvent
	err           error
}

// huntRound runs one round under prefix and returns what went wrong.
func huntRound(ctx context.Context, a, b kvdb.Broker, prefix string) []string {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends this round's watches while other rounds create theirs
	_, before, err := a.List(ctx, prefix)
	if err != nil {
		return []string{prefix + ": list before the writes: " + err.Error()}
	}
	var started atomic.Int64
	written := make(chan error, 1)
	go func() { written <- huntWrite(ctx, a, b, prefix, &started) }()

	watches := []*huntWatch{{name: "list", fromRev: -1}, {name: "past", fromRev: before + 1}, {name: "now"}}
	var wg sync.WaitGroup
	for i, w := range watches {
		br := []kvdb.Broker{a, b}[i%2]
		wg.Go(func() { w.create(ctx, br, prefix, &started) })
	}
	wg.Wait()
	if err := <-written; err != nil {
		return []string{prefix + ": writes: " + err.Error()}
	}
	// Written once every watch exists: each of them must deliver it.
	if err := b.Put(ctx, prefix+huntEnd, nil); err != nil {
		return []string{prefix + ": end key: " + err.Error()}
	}
	for _, w := range watches {
		wg.Go(func() { w.read(prefix + huntEnd) })
	}
	wg.Wait()
	kvs, _, err := a.List(ctx, prefix)
	if err != nil {
		return []string{prefix + ": list after the writes: " + err.Error()}
	}
	var errs []string
	for _, w := range watches {
		if msg := w.check(kvs); msg != "" {
			errs = append(errs, fmt.Sprintf("%s watch %q from revision %d: %s", prefix, w.name, w.fromRev, msg))
		}
	}
	return errs
}

// huntWrite writes huntWrites new keys under prefix from both clients.
// started counts the writes begun.
func huntWrite(ctx context.Context, a, b kvdb.Broker, prefix string, started *atomic.Int64) error {
	for i := range huntWrites {
		br := []kvdb.Broker{a, b}[i%2]
		key := fmt.Sprintf("%sk%02d", prefix, i)
		started.Add(1)
		var err error
		if i%4 == 3 {
			_, err = br.Txn(ctx, nil, []kvdb.Op{kvdb.PutOp(key+"a", []byte("t")), kvdb.PutOp(key+"b", []byte("t"))})
		} else {
			err = br.Put(ctx, key, []byte("p"))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// create creates the watch ("list": from a List's rev+1).
func (w *huntWatch) create(ctx context.Context, br kvdb.Broker, prefix string, started *atomic.Int64) {
	if w.fromRev < 0 {
		_, rev, err := br.List(ctx, prefix)
		if err != nil {
			w.err = fmt.Errorf("list: %w", err)
			return
		}
		w.fromRev = rev + 1
	}
	w.ch, w.err = br.Watch(ctx, prefix, max(w.fromRev, 0))
	w.startedBefore = started.Load()
}

// read reads the watch until the end key, the channel closes or
// eventTimeout passes without an event.
func (w *huntWatch) read(end string) {
	if w.err != nil {
		return
	}
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.ch:
			if !ok {
				w.err = fmt.Errorf("channel closed after %d events", len(w.got))
				return
			}
			w.got = append(w.got, ev)
			if ev.Key == end {
				return
			}
			timer.Reset(eventTimeout)
		case <-timer.C:
			w.err = fmt.Errorf("no event for %s after %d events", eventTimeout, len(w.got))
			return
		}
	}
}

// check compares what the watch delivered with the keys written (kvs, as
// listed after the writes: every key was written once, so its mod
// revision is its write's). It returns "" when they agree.
func (w *huntWatch) check(kvs []kvdb.KeyValue) string {
	if w.err != nil {
		return fmt.Sprintf("%v; delivered %s", w.err, revKeys(w.got))
	}
	written := slices.Clone(kvs)
	slices.SortFunc(written, func(x, y kvdb.KeyValue) int {
		if x.Revision != y.Revision {
			return int(x.Revision - y.Revision)
		}
		return strings.Compare(x.Key, y.Key)
	})
	from := w.fromRev
	if from == 0 { // from now: the run the watch delivered must begin early enough
		if len(w.got) == 0 {
			return "delivered nothing"
		}
		from = w.got[0].Revision
		if must := firstStartedAfter(written, w.startedBefore); must != 0 && must < from {
			return fmt.Sprintf("began at revision %d, after the write at %d that began after Watch returned; delivered %s",
				from, must, revKeys(w.got))
		}
	}
	var want []string
	for _, kv := range written {
		if kv.Revision >= from {
			want = append(want, fmt.Sprintf("%d:%s", kv.Revision, kv.Key))
		}
	}
	got := make([]string, len(w.got))
	for i, ev := range w.got {
		got[i] = fmt.Sprintf("%d:%s", ev.Revision, ev.Key)
		if ev.Type != kvdb.EventPut || ev.PrevValue != nil {
			return fmt.Sprintf("event %s is not the creation of a new key: %+v", got[i], ev)
		}
	}
	if !slices.Equal(got, want) {
		return fmt.Sprintf("delivered %v, want %v", got, want)
	}
	return ""
}

// firstStartedAfter returns the revision of the first write (in revision
// order: the writer writes one at a time) that began after Watch returned,
// or 0 when there is none. Writes are counted as the writer counts them: a
// transaction is one write.
func firstStartedAfter(written []kvdb.KeyValue, startedBefore int64) int64 {
	var revs []int64
	for _, kv := range written {
		if len(revs) == 0 || revs[len(revs)-1] != kv.Revision {
			revs = append(revs, kv.Revision)
		}
	}
	if int(startedBefore) >= len(revs) {
		return 0
	}
	return revs[startedBefore]
}

// revKeys prints events as revision:key.
func revKeys(evs []kvdb.WatchEvent) string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprintf("%d:%s", ev.Revision, ev.Key)
	}
	return "[" + strings.Join(out, " ") + "]"
}
