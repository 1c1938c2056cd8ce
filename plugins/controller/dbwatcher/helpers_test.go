package dbwatcher_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/controller/dbwatcher"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
)

// Timeouts of Eventually and Consistently.
const (
	waitLong  = 10 * time.Second
	waitShort = 300 * time.Millisecond
)

// mirrorPrefix is where the tests keep the mirror.
const mirrorPrefix = "/test/mirror/"

// testLogger sends logs to the test output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// quietLogger keeps warnings and errors only (for the noisy store plugins).
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// etcdConfig is a client config with short probe and reconnect intervals.
// Delayed start is allowed so that a slow first probe on a loaded machine
// does not fail Init: the watcher starts on the first connection anyway.
func etcdConfig(endpoint string) etcd.Config {
	cfg := etcd.DefaultConfig()
	cfg.Endpoints = []string{endpoint}
	cfg.AllowDelayedStart = true
	cfg.DialTimeout = time.Second
	cfg.OperationTimeout = 3 * time.Second
	cfg.ReconnectInterval = 100 * time.Millisecond
	cfg.ProbeInterval = 100 * time.Millisecond
	return cfg
}

// startEtcdPlugin builds the etcd plugin on cfg, runs Init and AfterInit
// and closes it at cleanup. rep may be nil.
func startEtcdPlugin(t testing.TB, cfg etcd.Config, rep health.Reporter) *etcd.Plugin {
	t.Helper()
	p := etcd.NewPlugin(etcd.UseConf(cfg), etcd.UseEnv(func(string) (string, bool) { return "", false }),
		etcd.UseDeps(func(d *etcd.Deps) {
			d.Cfg, d.Log = config.NoFile, quietLogger(t)
			if rep != nil {
				d.StatusCheck = rep
			}
		}))
	if err := p.Init(); err != nil {
		t.Fatalf("etcd Init: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.AfterInit(); err != nil {
		t.Fatalf("etcd AfterInit: %v", err)
	}
	return p
}

// startEtcd runs a test server and a plugin connected to it.
func startEtcd(t testing.TB) (*etcdtest.Server, *etcd.Plugin) {
	srv := etcdtest.Start(t)
	return srv, startEtcdPlugin(t, etcdConfig(srv.Endpoint()), nil)
}

// openBolt opens the bolt file at path; close it with the returned
// function (also called at cleanup; calling it twice is fine).
func openBolt(t testing.TB, path string) (*bolt.Plugin, func()) {
	t.Helper()
	cfg := bolt.DefaultConfig()
	cfg.DBPath = path
	cfg.LockTimeout = time.Second
	p := bolt.NewPlugin(bolt.UseConf(cfg), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, quietLogger(t) }))
	if err := p.Init(); err != nil {
		t.Fatalf("bolt Init: %v", err)
	}
	closeFn := func() { _ = p.Close() }
	t.Cleanup(closeFn)
	return p, closeFn
}

// tempBolt opens a fresh bolt file in t.TempDir().
func tempBolt(t testing.TB) *bolt.Plugin {
	p, _ := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	return p
}

// startWatcher builds and starts a watcher with the test defaults (short
// retry interval, test logger, test mirror prefix) and stops it at cleanup.
func startWatcher(t testing.TB, cfg dbwatcher.Config) *dbwatcher.Watcher {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = testLogger(t)
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = 50 * time.Millisecond
	}
	if cfg.MirrorPrefix == "" {
		cfg.MirrorPrefix = mirrorPrefix
	}
	w, err := dbwatcher.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w.Start()
	t.Cleanup(w.Stop)
	return w
}

// encode marshals m with the codec, failing the test on error.
func encode(t testing.TB, m proto.Message) []byte {
	t.Helper()
	data, err := codec.Marshal(m)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return data
}

// put writes m (or raw bytes) under codec.KSRPrefix+key.
func put(t testing.TB, b kvdb.Broker, key string, value any) {
	t.Helper()
	var data []byte
	switch v := value.(type) {
	case proto.Message:
		data = encode(t, v)
	case []byte:
		data = v
	case string:
		data = []byte(v)
	default:
		t.Fatalf("put %q: unsupported value %T", key, value)
	}
	if err := b.Put(context.Background(), codec.KSRPrefix+key, data); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

// del deletes codec.KSRPrefix+key.
func del(t testing.TB, b kvdb.Broker, key string) {
	t.Helper()
	if _, err := b.Delete(context.Background(), codec.KSRPrefix+key); err != nil {
		t.Fatalf("delete %q: %v", key, err)
	}
}

// mirrorContent lists the mirror as key -> raw value.
func mirrorContent(g Gomega, local kvdb.Store) map[string]string {
	kvs, _, err := local.NewBroker(mirrorPrefix).List(context.Background(), "")
	g.Expect(err).NotTo(HaveOccurred())
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = string(kv.Value)
	}
	return out
}

// errRefused is what a fakeLoop refuses pushes with by default.
var errRefused = errors.New("push refused by the test")

// fakeLoop is a dbwatcher.Loop that records the events it accepts and can
// refuse pushes.
type fakeLoop struct {
	mu     sync.Mutex
	events []api.Event
	refuse int   // refuse this many more pushes with err
	err    error // nil means errRefused
	pushes int   // every push, refused or not
	// hold, when set, makes every push wait until it is closed (after
	// counting the push), so that a test can keep the watcher inside a push.
	hold chan struct{}
}

var _ dbwatcher.Loop = (*fakeLoop)(nil)

func (l *fakeLoop) PushEventWait(_ context.Context, ev api.Event) error {
	l.mu.Lock()
	l.pushes++
	hold := l.hold
	l.mu.Unlock()
	if hold != nil {
		<-hold
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse > 0 {
		l.refuse--
		if l.err != nil {
			return l.err
		}
		return errRefused
	}
	l.events = append(l.events, ev)
	return nil
}

// holdPushes makes the pushes from now on wait until the returned func
// is called.
func (l *fakeLoop) holdPushes() (release func()) {
	hold := make(chan struct{})
	l.mu.Lock()
	l.hold = hold
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		l.hold = nil
		l.mu.Unlock()
		close(hold)
	}
}

// refuseNext makes the next n pushes fail with errRefused.
func (l *fakeLoop) refuseNext(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refuse = n
}

// all returns a copy of the accepted events.
func (l *fakeLoop) all() []api.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]api.Event(nil), l.events...)
}

// count is the number of accepted events.
func (l *fakeLoop) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// pushCount is the number of pushes, refused or not.
func (l *fakeLoop) pushCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pushes
}

// fullLoop is a dbwatcher.Loop whose queue stays full: every push waits
// until the watcher gives up, and says so on waiting first.
type fullLoop struct{ waiting chan struct{} }

func (l *fullLoop) PushEventWait(ctx context.Context, _ api.Event) error {
	select {
	case l.waiting <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// resyncs returns the accepted DBResync events.
func (l *fakeLoop) resyncs() []*api.DBResync {
	var out []*api.DBResync
	for _, ev := range l.all() {
		if r, ok := ev.(*api.DBResync); ok {
			out = append(out, r)
		}
	}
	return out
}

// changes returns the accepted KubeStateChange events.
func (l *fakeLoop) changes() []*api.KubeStateChange {
	var out []*api.KubeStateChange
	for _, ev := range l.all() {
		if c, ok := ev.(*api.KubeStateChange); ok {
			out = append(out, c)
		}
	}
	return out
}

// nthChange waits for the n-th (from 1) change and returns it.
func (l *fakeLoop) nthChange(g Gomega, n int) *api.KubeStateChange {
	g.Eventually(func() int { return len(l.changes()) }).WithTimeout(waitLong).
		Should(BeNumerically(">=", n), "change #%d", n)
	return l.changes()[n-1]
}

// nthResync waits for the n-th (from 1) DBResync and returns it.
func (l *fakeLoop) nthResync(g Gomega, n int) *api.DBResync {
	g.Eventually(func() int { return len(l.resyncs()) }).WithTimeout(waitLong).
		Should(BeNumerically(">=", n), "DB resync #%d", n)
	return l.resyncs()[n-1]
}

// equalProto matches a proto.Message equal to want (proto.Equal).
func equalProto(want proto.Message) OmegaMatcher {
	return WithTransform(func(got proto.Message) bool { return proto.Equal(got, want) },
		BeTrue())
}

// expectValue checks that state[resource][key] equals want.
func expectValue(g Gomega, state api.KubeStateData, resource, key string, want proto.Message) {
	g.ExpectWithOffset(1, state).To(HaveKey(resource))
	got, ok := state[resource][key]
	g.ExpectWithOffset(1, ok).To(BeTrue(), "%s %s present", resource, key)
	g.ExpectWithOffset(1, proto.Equal(got, want)).To(BeTrue(), "%s %s: got %v, want %v", resource, key, got, want)
}

// fakeReporter keeps the last health state a store reported.
type fakeReporter struct {
	mu   sync.Mutex
	last health.State
}

func (r *fakeReporter) Register(string, health.Probe) {}

func (r *fakeReporter) ReportStateChange(_ string, state health.State, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = state
}

func (r *fakeReporter) state() health.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// proxy forwards loopback TCP connections to a backend and can cut them:
// clients then see the backend as unreachable while it keeps running.
type proxy struct {
	ln      net.Listener
	backend string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy listens on 127.0.0.1:0 and forwards to backend until cleanup.
func startProxy(t testing.TB, backend string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &proxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track registers c unless the proxy is cut.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) serve(c net.Conn) {
	b, err := net.DialTimeout("tcp", p.backend, time.Second)
	if err != nil || !p.track(b) {
		_ = c.Close()
		if b != nil {
			_ = b.Close()
		}
		return
	}
	var inner sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	inner.Go(func() { pipe(b, c) })
	inner.Go(func() { pipe(c, b) })
	inner.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, b)
	p.mu.Unlock()
}

// setCut cuts every connection and refuses new ones (true), or lets new
// connections through again (false).
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

func (p *proxy) close() {
	p.setCut(true)
	_ = p.ln.Close()
	p.wg.Wait()
}

// freePort returns a loopback port nobody listens on right now.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// errBroken is what the breakable store's watch reports when broken.
var errBroken = errors.New("watch broken by the test")

// breakableStore wraps a store so that a test can break its watches
// (their channels close) and inject events into them.
type breakableStore struct {
	kvdb.Store

	mu      sync.Mutex
	watches []*breakableWatch
}

type breakableWatch struct {
	prefix string
	inject chan kvdb.WatchEvent
	broken chan struct{}
	once   sync.Once
}

// NewBroker wraps the inner view so that its watches can be broken.
func (s *breakableStore) NewBroker(prefix string) kvdb.Broker {
	return &breakableBroker{Broker: s.Store.NewBroker(prefix), s: s}
}

// breakAll closes the channels of every watch made so far.
func (s *breakableStore) breakAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watches {
		w.once.Do(func() { close(w.broken) })
	}
}

// breakPrefix closes the channels of the watches of prefix made so far.
func (s *breakableStore) breakPrefix(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watches {
		if w.prefix == prefix {
			w.once.Do(func() { close(w.broken) })
		}
	}
}

// injectLatest sends ev on the most recent watch.
func (s *breakableStore) injectLatest(ev kvdb.WatchEvent) error {
	s.mu.Lock()
	if len(s.watches) == 0 {
		s.mu.Unlock()
		return fmt.Errorf("no watch yet: %w", errBroken)
	}
	w := s.watches[len(s.watches)-1]
	s.mu.Unlock()
	select {
	case w.inject <- ev:
		return nil
	case <-w.broken:
		return errBroken
	case <-time.After(waitLong):
		return errors.New("inject: nobody reads the watch")
	}
}

// watchCount is the number of watches made so far.
func (s *breakableStore) watchCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches)
}

type breakableBroker struct {
	kvdb.Broker
	s *breakableStore
}

// Watch forwards the inner watch's events and injected ones until the
// inner channel closes, ctx ends or the test breaks the watch.
func (b *breakableBroker) Watch(ctx context.Context, prefix string, fromRev int64) (<-chan kvdb.WatchEvent, error) {
	ctx, cancel := context.WithCancel(ctx)
	in, err := b.Broker.Watch(ctx, prefix, fromRev)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &breakableWatch{prefix: prefix, inject: make(chan kvdb.WatchEvent), broken: make(chan struct{})}
	b.s.mu.Lock()
	b.s.watches = append(b.s.watches, w)
	b.s.mu.Unlock()
	out := make(chan kvdb.WatchEvent)
	go func() {
		defer close(out)
		defer cancel()
		for {
			var ev kvdb.WatchEvent
			var ok bool
			select {
			case ev, ok = <-in:
				if !ok {
					return
				}
			case ev = <-w.inject:
			case <-w.broken:
				return
			case <-ctx.Done():
				return
			}
			select {
			case out <- ev:
			case <-w.broken:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// extraValueStore wraps a store so that every List of its views also
// returns one more key-value: a value etcd's default request limit would
// refuse, as a cluster with a larger --max-request-bytes may hold.
type extraValueStore struct {
	kvdb.Store
	extra kvdb.KeyValue // key relative to the view's prefix
}

// NewBroker wraps the inner view so that List adds the extra key.
func (s *extraValueStore) NewBroker(prefix string) kvdb.Broker {
	return &extraValueBroker{Broker: s.Store.NewBroker(prefix), extra: s.extra}
}

type extraValueBroker struct {
	kvdb.Broker
	extra kvdb.KeyValue
}

func (b *extraValueBroker) List(ctx context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	kvs, rev, err := b.Broker.List(ctx, prefix)
	if err != nil {
		return nil, 0, err
	}
	return append(kvs, b.extra), rev, nil
}
