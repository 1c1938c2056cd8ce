package ksr

import (
	"log/slog"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
)

func noEnv(string) (string, bool) { return "", false }

func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// newDB returns an initialised etcd plugin connected to srv, closed at
// cleanup.
func newDB(t testing.TB, srv *etcdtest.Server) *etcd.Plugin {
	t.Helper()
	c := etcd.DefaultConfig()
	c.Endpoints = []string{srv.Endpoint()}
	c.DialTimeout = 3 * time.Second
	c.OperationTimeout = 2 * time.Second
	c.ReconnectInterval = 100 * time.Millisecond
	c.ProbeInterval = 100 * time.Millisecond
	db := etcd.NewPlugin(etcd.UseConf(c), etcd.UseEnv(noEnv), etcd.UseDeps(func(d *etcd.Deps) {
		d.Cfg, d.Log = config.NoFile, slog.New(slog.DiscardHandler)
	}))
	if err := db.Init(); err != nil {
		t.Fatalf("etcd plugin Init: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// testConfig is ksr.conf for tests: long periods (tests trigger resyncs
// themselves), a short election TTL.
// testConfig is the config of the tests of the mirror's mechanics: pods in
// the cluster layout (every pod at one key, scheduled or not);
// layout_test.go covers the per-node layout.
func testConfig() Config {
	c := DefaultConfig()
	c.PodLayout = PodLayoutCluster
	c.ResyncPeriod = time.Hour
	c.ElectionTTL = 2 * time.Second
	c.NodeIDGracePeriod = time.Minute
	return c
}

// startKSR starts a reflector replica named id on db and client; Close
// runs at cleanup (and may run earlier).
func startKSR(t testing.TB, db *etcd.Plugin, client kubernetes.Interface, id string, cfg Config, opts ...Option) *Plugin {
	t.Helper()
	opts = append([]Option{UseConf(cfg), UseClient(client), UseIdentity(id), UseEnv(noEnv),
		UseDeps(func(d *Deps) {
			d.Cfg, d.Log = config.NoFile, testLog(t).With("replica", id)
			d.DB, d.Election = db, db
		})}, opts...)
	p := NewPlugin(opts...)
	if err := p.Init(); err != nil {
		t.Fatalf("ksr Init: %v", err)
	}
	if err := p.AfterInit(); err != nil {
		t.Fatalf("ksr AfterInit: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// leading waits until p leads and has done its first resync and written
// its first mirror marker (so that the next write is a test's).
func leading(t testing.TB, p *Plugin) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		s := p.status.get()
		return s.Leading && s.LastResync != nil && s.MirrorMarker != nil
	}).WithTimeout(10*time.Second).Should(BeTrue(), "replica leads")
}

// stored decodes the value etcd holds under the KSR key into m; false
// when the key is absent.
func stored(t testing.TB, cli *clientv3.Client, key string, m proto.Message) bool {
	t.Helper()
	resp, err := cli.Get(t.Context(), codec.KSRPrefix+key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return false
	}
	if err := codec.Unmarshal(resp.Kvs[0].Value, m); err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
	return true
}

// modRev is the mod revision of a KSR key (0: absent).
func modRev(t testing.TB, cli *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := cli.Get(t.Context(), codec.KSRPrefix+key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].ModRevision
}

// writes is how many keys p wrote for resource with op.
func writes(p *Plugin, resource, op string) float64 {
	return testutil.ToFloat64(p.metrics.writes.WithLabelValues(resource, op))
}

// informersFor is an informer factory on an empty fake clientset.
func informersFor(t testing.TB) informers.SharedInformerFactory {
	t.Helper()
	return informers.NewSharedInformerFactory(fake.NewClientset(), 0)
}
