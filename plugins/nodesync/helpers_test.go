package nodesync_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

func noEnv(string) (string, bool) { return "", false }

// testLog sends a plugin's logs to the test output.
func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// label is a servicelabel.ReaderAPI with a fixed label.
type label string

func (l label) GetAgentLabel() string                   { return string(l) }
func (l label) GetAgentPrefix() string                  { return "/vnf-agent/" + string(l) + "/" }
func (l label) GetDifferentAgentPrefix(o string) string { return "/vnf-agent/" + o + "/" }
func (l label) GetAllAgentsPrefix() string              { return "/vnf-agent/" }

// loop is an api.EventLoop that records the pushed events (and the
// follow-ups of a transaction built with updater.txn).
type loop struct {
	mu     sync.Mutex
	events []api.Event
	err    error // returned by PushEvent when set
}

func (l *loop) PushEvent(ev api.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.events = append(l.events, ev)
	return nil
}

// retries counts the ClaimRetry events pushed.
func (l *loop) retries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ev := range l.events {
		if _, ok := ev.(*nodesync.ClaimRetry); ok {
			n++
		}
	}
	return n
}

// take returns the NodeUpdates pushed since the last take (other events
// are dropped).
func (l *loop) take() []*nodesync.NodeUpdate {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*nodesync.NodeUpdate
	for _, ev := range l.events {
		if u, ok := ev.(*nodesync.NodeUpdate); ok {
			out = append(out, u)
		}
	}
	l.events = nil
	return out
}

// checks returns the NodeIDChecks pushed so far (they stay recorded).
func (l *loop) checks() []*nodesync.NodeIDCheck {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*nodesync.NodeIDCheck
	for _, ev := range l.events {
		if c, ok := ev.(*nodesync.NodeIDCheck); ok {
			out = append(out, c)
		}
	}
	return out
}

// etcdConfig is a client config with short timeouts for tests.
func etcdConfig(endpoint string) etcd.Config {
	c := etcd.DefaultConfig()
	c.Endpoints = []string{endpoint}
	c.DialTimeout = 3 * time.Second
	c.OperationTimeout = 2 * time.Second
	c.ReconnectInterval = 100 * time.Millisecond
	c.ProbeInterval = 100 * time.Millisecond
	return c
}

// shortTimeout is for tests that stop etcd: requests fail after a second
// instead of the default two, yet a loaded machine still answers in time.
func shortTimeout(c *etcd.Config) { c.OperationTimeout = time.Second }

// newDB returns an initialised etcd plugin connected to srv, closed at
// cleanup.
func newDB(t testing.TB, srv *etcdtest.Server, mod ...func(*etcd.Config)) *etcd.Plugin {
	t.Helper()
	return newDBAt(t, srv.Endpoint(), mod...)
}

// newDBAt is newDB on an endpoint (a proxy).
func newDBAt(t testing.TB, endpoint string, mod ...func(*etcd.Config)) *etcd.Plugin {
	t.Helper()
	cfg := etcdConfig(endpoint)
	for _, m := range mod {
		m(&cfg)
	}
	db := etcd.NewPlugin(etcd.UseConf(cfg), etcd.UseEnv(noEnv), etcd.UseDeps(func(d *etcd.Deps) {
		d.Cfg, d.Log = config.NoFile, slog.New(slog.DiscardHandler)
	}))
	if err := db.Init(); err != nil {
		t.Fatalf("etcd plugin Init: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newPlugin returns an initialised nodesync plugin for node name. An etcd
// plugin given as db is also its Presence store; no environment is read.
func newPlugin(t testing.TB, name string, db kvdb.Store, ev api.EventLoop, opts ...nodesync.Option) *nodesync.Plugin {
	t.Helper()
	opts = append([]nodesync.Option{nodesync.UseEnv(noEnv), nodesync.UseDeps(func(d *nodesync.Deps) {
		d.Cfg, d.Log = config.NoFile, testLog(t)
		d.ServiceLabel = label(name)
		if db != nil { // a nil *etcd.Plugin must stay a nil interface
			d.DB = db
		}
		if ps, ok := db.(*etcd.Plugin); ok && ps != nil {
			d.Presence = ps
		}
		d.EventLoop = ev
	})}, opts...)
	p := nodesync.NewPlugin(opts...)
	if err := p.Init(); err != nil {
		t.Fatalf("nodesync Init: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// withLocalDB sets the LocalDB dependency.
func withLocalDB(b kvdb.Broker) nodesync.Option {
	return nodesync.UseDeps(func(d *nodesync.Deps) { d.LocalDB = b })
}

// withTTL sets the presence TTL.
func withTTL(ttl time.Duration) nodesync.Option {
	c := nodesync.DefaultConfig()
	c.PresenceTTL = ttl
	return nodesync.UseConf(c)
}

// newBolt returns an initialised bolt plugin on a file in t.TempDir(),
// closed at cleanup.
func newBolt(t testing.TB) *bolt.Plugin {
	t.Helper()
	bc := bolt.DefaultConfig()
	bc.DBPath = filepath.Join(t.TempDir(), "bolt.db")
	b := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) {
		d.Cfg, d.Log = config.NoFile, slog.New(slog.DiscardHandler)
	}))
	if err := b.Init(); err != nil {
		t.Fatalf("bolt Init: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// storedID reads the node ID nodesync stored in b ("" when none).
func storedID(t testing.TB, b kvdb.Broker) string {
	t.Helper()
	kv, found, err := b.Get(context.Background(), nodesync.NodeIDKey)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		return ""
	}
	return string(kv.Value)
}

// remote and local are DB resync events of a kube state.
func remote(ks api.KubeStateData) *api.DBResync { return &api.DBResync{KubeState: ks} }
func local(ks api.KubeStateData) *api.DBResync  { return &api.DBResync{Local: true, KubeState: ks} }

// resync runs a first DB resync of ks.
func resync(p *nodesync.Plugin, ks api.KubeStateData) error {
	if ks == nil {
		ks = api.KubeStateData{}
	}
	return p.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	data, err := codec.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// putRaw writes value under the KSR prefix + key.
func putRaw(t testing.TB, db kvdb.Store, key string, value []byte) {
	t.Helper()
	if err := db.NewBroker(codec.KSRPrefix).Put(context.Background(), key, value); err != nil {
		t.Fatal(err)
	}
}

// putRecord writes a vppnode record.
func putRecord(t testing.TB, db kvdb.Store, rec *vppnode.VppNode) {
	t.Helper()
	putRaw(t, db, vppnode.Key(rec.Id), marshal(t, rec))
}

// records lists the vppnode records in etcd by ID.
func records(t testing.TB, db kvdb.Store) map[uint32]*vppnode.VppNode {
	t.Helper()
	kvs, _, err := db.NewBroker(codec.KSRPrefix).List(context.Background(), vppnode.KeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]*vppnode.VppNode{}
	for _, kv := range kvs {
		id, err := vppnode.ParseKey(kv.Key)
		if err != nil {
			continue
		}
		rec := new(vppnode.VppNode)
		if err := codec.Unmarshal(kv.Value, rec); err != nil {
			t.Fatalf("record %s: %v", kv.Key, err)
		}
		out[id] = rec
	}
	return out
}

// vppState is a kube state holding vppnode records.
func vppState(recs ...*vppnode.VppNode) api.KubeResourceData {
	out := api.KubeResourceData{}
	for _, r := range recs {
		out[vppnode.Key(r.Id)] = r
	}
	return out
}

// nodeState is a kube state holding Kubernetes nodes.
func nodeState(nodes ...*node.Node) api.KubeResourceData {
	out := api.KubeResourceData{}
	for _, n := range nodes {
		out[node.Key(n.Name)] = n
	}
	return out
}

// internalIP and friends build node addresses.
func addr(t node.NodeAddress_NodeAddressType, a string) *node.NodeAddress {
	return &node.NodeAddress{Type: t, Address: a}
}

// fakeStore is a kvdb.Store whose List returns the keys of listing under
// the prefix (or listErr), whose Get finds a key of listing, and whose Txn
// returns txnOK (or txnErr); Put returns putErr. Other methods panic. It
// holds only what the test puts in listing: its Txn and Put change
// nothing.
type fakeStore struct {
	kvdb.Store
	mu      sync.Mutex
	listing []kvdb.KeyValue
	listErr error
	txnOK   bool
	txnErr  error
	putErr  error
	txns    int
	lose    int // the first lose transactions fail (taken meanwhile)
	puts    map[string]string
}

var _ kvdb.Store = (*fakeStore)(nil)

func (f *fakeStore) NewBroker(prefix string) kvdb.Broker { return kvdb.WithPrefix(f, prefix) }
func (f *fakeStore) String() string                      { return "fake" }

func (f *fakeStore) List(_ context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []kvdb.KeyValue
	for _, kv := range f.listing {
		if strings.HasPrefix(kv.Key, prefix) {
			out = append(out, kv)
		}
	}
	return out, 1, f.listErr
}

func (f *fakeStore) Get(_ context.Context, key string) (kvdb.KeyValue, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, kv := range f.listing {
		if kv.Key == key {
			return kv, true, f.listErr
		}
	}
	return kvdb.KeyValue{}, false, f.listErr
}

func (f *fakeStore) Txn(context.Context, []kvdb.Cmp, []kvdb.Op) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.txns++
	return f.txnOK && f.txnErr == nil && f.txns > f.lose, f.txnErr
}

func (f *fakeStore) Put(_ context.Context, key string, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.puts == nil {
		f.puts = map[string]string{}
	}
	f.puts[key] = string(value)
	return f.putErr
}

var errBoom = errors.New("boom")

// record is the full key and value of a vppnode record, as List returns
// it from a root store.
func record(t testing.TB, rec *vppnode.VppNode) kvdb.KeyValue {
	t.Helper()
	return kvdb.KeyValue{Key: codec.KSRPrefix + vppnode.Key(rec.Id), Value: marshal(t, rec)}
}

// runAtOnce runs the first resync of every plugin, each on its own
// goroutine, all released together, and returns their errors.
func runAtOnce(ps []*nodesync.Plugin) []error {
	start := make(chan struct{})
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			<-start
			errs[i] = resync(p, nil)
		})
	}
	close(start)
	wg.Wait()
	return errs
}
