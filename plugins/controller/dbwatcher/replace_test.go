package dbwatcher_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/dbwatcher"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// memStore is an in-memory kvdb.Store that fails the way the etcd plugin
// does when etcd is replaced behind its endpoint (replace): the data is
// gone and revisions start again at 1, under the same or another store ID;
// the plugin ends every watch (their channels close), then calls the
// OnStoreReplaced callbacks. It serves Put, Delete, List and Watch (the
// watcher's remote uses no more); listFails makes the next Lists fail.
type memStore struct {
	mu        sync.Mutex
	id        int
	rev       int64
	data      map[string]kvdb.KeyValue
	history   []kvdb.WatchEvent
	watches   map[*memWatch]struct{}
	replaced  []func(kvdb.StoreReplaced)
	listFails int
}

type memWatch struct {
	prefix  string
	fromRev int64
	ch      chan kvdb.WatchEvent // buffered: the tests write little
}

var _ kvdb.ReplaceNotifier = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{id: 1, rev: 1, data: map[string]kvdb.KeyValue{}, watches: map[*memWatch]struct{}{}}
}

func (s *memStore) String() string                      { return "memstore" }
func (s *memStore) NewBroker(prefix string) kvdb.Broker { return kvdb.WithPrefix(s, prefix) }
func (s *memStore) OnConnect(fn func() error)           { _ = fn() }
func (s *memStore) OnReconnect(func())                  {}

func (s *memStore) OnStoreReplaced(fn func(kvdb.StoreReplaced)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replaced = append(s.replaced, fn)
}

var errNotServed = errors.New("memstore: not served")

func (s *memStore) Get(context.Context, string) (kvdb.KeyValue, bool, error) {
	return kvdb.KeyValue{}, false, errNotServed
}

func (s *memStore) Txn(context.Context, []kvdb.Cmp, []kvdb.Op) (bool, error) {
	return false, errNotServed
}

func (s *memStore) Put(_ context.Context, key string, value []byte) error {
	s.write(kvdb.WatchEvent{Type: kvdb.EventPut, Key: key, Value: slices.Clone(value)})
	return nil
}

func (s *memStore) Delete(_ context.Context, key string) (bool, error) {
	return s.write(kvdb.WatchEvent{Type: kvdb.EventDelete, Key: key}), nil
}

// write applies ev at the next revision and sends it to the watches.
func (s *memStore) write(ev kvdb.WatchEvent) (existed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	ev.Revision = s.rev
	old, existed := s.data[ev.Key]
	if existed {
		ev.PrevValue = old.Value
	}
	if ev.Type == kvdb.EventPut {
		s.data[ev.Key] = kvdb.KeyValue{Key: ev.Key, Value: ev.Value, Revision: s.rev}
	} else {
		delete(s.data, ev.Key)
	}
	s.history = append(s.history, ev)
	for w := range s.watches {
		w.send(ev)
	}
	return existed
}

func (w *memWatch) send(ev kvdb.WatchEvent) {
	if ev.Revision >= w.fromRev && strings.HasPrefix(ev.Key, w.prefix) {
		w.ch <- ev
	}
}

func (s *memStore) List(_ context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listFails > 0 {
		s.listFails--
		return nil, 0, errors.New("memstore: list failed (test)")
	}
	var kvs []kvdb.KeyValue
	for k, kv := range s.data {
		if strings.HasPrefix(k, prefix) {
			kvs = append(kvs, kv)
		}
	}
	slices.SortFunc(kvs, func(a, b kvdb.KeyValue) int { return strings.Compare(a.Key, b.Key) })
	return kvs, s.rev, nil
}

// Watch replays the history from fromRev and follows; a watch from a
// revision the store has not reached waits for it, as etcd's does.
func (s *memStore) Watch(ctx context.Context, prefix string, fromRev int64) (<-chan kvdb.WatchEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fromRev == 0 {
		fromRev = s.rev + 1
	}
	w := &memWatch{prefix: prefix, fromRev: fromRev, ch: make(chan kvdb.WatchEvent, 256)}
	for _, ev := range s.history {
		w.send(ev)
	}
	s.watches[w] = struct{}{}
	context.AfterFunc(ctx, func() { s.endWatch(w) })
	return w.ch, nil
}

func (s *memStore) endWatch(w *memWatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.watches[w]; ok {
		delete(s.watches, w)
		close(w.ch)
	}
}

// replace puts an empty store behind the "endpoint", under another store
// ID when newID is set, and reports it as the etcd plugin does.
func (s *memStore) replace(newID bool) {
	s.mu.Lock()
	r := kvdb.StoreReplaced{Reason: kvdb.ReasonRevisionBack, OldID: fmt.Sprint(s.id), LastRevision: s.rev, Revision: 1}
	if newID {
		s.id++
		r.Reason = kvdb.ReasonStoreID
	}
	r.NewID = fmt.Sprint(s.id)
	s.rev, s.data, s.history = 1, map[string]kvdb.KeyValue{}, nil
	for w := range s.watches {
		delete(s.watches, w)
		close(w.ch)
	}
	callbacks := slices.Clone(s.replaced)
	s.mu.Unlock()
	for _, fn := range callbacks {
		fn(r)
	}
}

// A replaced store is listed again at once (no retry timer runs: the
// retry interval is an hour), its empty state is pushed, and a pod
// written to the new store, at a revision far below the old store's, is
// delivered, not dropped as stale.
func TestAReplacedStoreIsListedAgainAtOnce(t *testing.T) {
	for _, newID := range []bool{false, true} {
		t.Run(fmt.Sprintf("new store ID %v", newID), func(t *testing.T) {
			g := NewWithT(t)
			remote := newMemStore()
			for i := range 40 {
				put(t, remote, node.Key("a"), &node.Node{Name: "a", Pod_CIDR: fmt.Sprintf("10.1.%d.0/24", i)})
			}
			loop := &fakeLoop{}
			w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop, RetryInterval: time.Hour})
			g.Expect(loop.nthResync(g, 1).KubeState.Len()).To(Equal(1))

			remote.replace(newID)
			second := loop.nthResync(g, 2)
			g.Expect(second.Local).To(BeFalse())
			g.Expect(second.KubeState.Len()).To(BeZero(), "the new store is empty")
			g.Expect(w.Stats().StoreReplacements).To(BeEquivalentTo(1))

			put(t, remote, pod.Key("web", "default"), podWeb)
			c := loop.nthChange(g, 1)
			g.Expect(c.Key).To(Equal(pod.Key("web", "default")))
			g.Expect(c.PrevValue).To(BeNil())
			g.Expect(w.Stats().DroppedStale).To(BeZero())
		})
	}
}

// A replacement reported while the watcher holds no watch (its last
// resync failed and waits an hour for its retry) is listed at once: the
// callback alone brings the resync.
func TestAReplacementWhileNotWatchingIsListedAtOnce(t *testing.T) {
	g := NewWithT(t)
	remote := newMemStore()
	put(t, remote, node.Key("a"), nodeA)
	remote.listFails = 1
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop, RetryInterval: time.Hour})
	g.Eventually(func() int {
		remote.mu.Lock()
		defer remote.mu.Unlock()
		return remote.listFails
	}).Should(BeZero(), "the first resync failed")
	g.Consistently(loop.count).WithTimeout(waitShort).Should(BeZero())

	remote.replace(false)
	first := loop.nthResync(g, 1)
	g.Expect(first.KubeState.Len()).To(BeZero())
	g.Expect(w.Stats().StoreReplacements).To(BeEquivalentTo(1))
}

// A broken watch and a resync request that reach the watcher together
// (the store ends the watch and reports the replacement) lead to one
// resync: the request made before a resync begins is served by it.
func TestABrokenWatchAndARequestMakeOneResync(t *testing.T) {
	g := NewWithT(t)
	remote := newMemStore()
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop, RetryInterval: time.Hour})
	loop.nthResync(g, 1)
	for i := range 16 {
		pushes := loop.pushCount()
		release := loop.holdPushes()
		put(t, remote, node.Key("a"), &node.Node{Name: "a", Pod_CIDR: fmt.Sprintf("10.2.%d.0/24", i)})
		g.Eventually(loop.pushCount).Should(Equal(pushes+1), "the watcher is in the push of change #%d", i)
		remote.mu.Lock()
		for mw := range remote.watches { // the store ends the watch...
			delete(remote.watches, mw)
			close(mw.ch)
		}
		remote.mu.Unlock()
		w.RequestResync() // ...and asks for a resync
		release()
		loop.nthResync(g, i+2)
		g.Consistently(func() int { return len(loop.resyncs()) }).WithTimeout(50*time.Millisecond).
			Should(Equal(i+2), "round %d: one resync for both", i)
	}
}

// The etcd server process behind the endpoint is replaced by an empty one
// on the same port. With the plugin's reconnect resync off (so nothing
// else lists), the watcher lists the new store within seconds and a pod
// written to it reaches the loop. Before, the watch resumed from the old
// store's revision and stayed silent.
func TestAReplacedEtcdProcessIsListedAgain(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(endpoint string) etcd.Config
	}{
		{"probe-interval 100ms, resync-after-reconnect off", func(ep string) etcd.Config {
			cfg := etcdConfig(ep)
			cfg.ResyncAfterReconnect = false
			return cfg
		}},
		{"the default etcd.conf", func(ep string) etcd.Config {
			cfg := etcd.DefaultConfig()
			cfg.Endpoints = []string{ep}
			return cfg
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			proc := etcdtest.StartProcess(t)
			remote := startEtcdPlugin(t, c.cfg(proc.Endpoint()), nil)
			for i := range 30 {
				put(t, remote, node.Key("a"), &node.Node{Name: "a", Pod_CIDR: fmt.Sprintf("10.3.%d.0/24", i)})
			}
			loop := &fakeLoop{}
			w := startWatcher(t, dbwatcher.Config{Remote: remote, Local: tempBolt(t), Loop: loop, RetryInterval: time.Hour})
			g.Expect(loop.nthResync(g, 1).KubeState.Len()).To(Equal(1))

			proc.Replace()
			up := time.Now()
			g.Eventually(func() int { return len(loop.resyncs()) }).WithTimeout(15 * time.Second).
				Should(BeNumerically(">=", 2))
			t.Logf("listed again %s after the new etcd answered", time.Since(up).Round(time.Millisecond))
			g.Expect(loop.resyncs()[1].KubeState.Len()).To(BeZero())
			g.Expect(w.Stats().StoreReplacements).To(BeEquivalentTo(1))

			key := codec.KSRPrefix + pod.Key("web", "default")
			g.Expect(remote.Put(t.Context(), key, encode(t, podWeb))).To(Succeed())
			g.Eventually(func() bool { return reached(loop, pod.Keyword, pod.Key("web", "default")) }).
				WithTimeout(10*time.Second).Should(BeTrue(), "the new store's key reaches the loop")
		})
	}
}

// reached tells whether key of resource reached the loop after its second
// resync: as a change, or in a later resync's state (with the default
// etcd.conf the reconnect resync may list it before the watch delivers
// it).
func reached(loop *fakeLoop, resource, key string) bool {
	for _, c := range loop.changes() {
		if c.Key == key {
			return true
		}
	}
	rs := loop.resyncs()
	for _, r := range rs[min(2, len(rs)):] {
		if _, ok := r.KubeState[resource][key]; ok {
			return true
		}
	}
	return false
}

// A compaction passes the watch while the agent is cut off from etcd: the
// resumed watch cannot be served, the etcd plugin closes it, and the
// watcher lists again at once, with the changes made meanwhile. The
// plugin's reconnect resync is off, so nothing else lists.
func TestACompactionPastTheWatchIsListedAgain(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	direct := startEtcdPlugin(t, etcdConfig(srv.Endpoint()), nil)
	px := startProxy(t, srv.Endpoint())
	cfg := etcdConfig(px.addr())
	cfg.ResyncAfterReconnect = false
	rep := &fakeReporter{}
	remote := startEtcdPlugin(t, cfg, rep)
	put(t, direct, node.Key("a"), nodeA)
	loop := &fakeLoop{}
	w := startWatcher(t, dbwatcher.Config{Remote: remote, Loop: loop, RetryInterval: time.Hour})
	loop.nthResync(g, 1)

	px.setCut(true)
	g.Eventually(rep.state).WithTimeout(waitLong).Should(Equal(health.Error))
	put(t, direct, node.Key("a"), nodeA2)
	put(t, direct, node.Key("b"), nodeB)
	_, err := srv.Client(t).Compact(t.Context(), currentRev(t, direct))
	g.Expect(err).NotTo(HaveOccurred())
	px.setCut(false)

	second := loop.nthResync(g, 2)
	expectValue(g, second.KubeState, "node", node.Key("a"), nodeA2)
	expectValue(g, second.KubeState, "node", node.Key("b"), nodeB)
	g.Expect(loop.changes()).To(BeEmpty(), "the changes came with the list, not through the watch")
	g.Expect(w.Stats().StoreReplacements).To(BeZero(), "a compaction is no replacement")
}

// currentRev returns the store's current revision.
func currentRev(t *testing.T, b kvdb.Broker) int64 {
	t.Helper()
	_, rev, err := b.List(t.Context(), "/")
	if err != nil {
		t.Fatal(err)
	}
	return rev
}
