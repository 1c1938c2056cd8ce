package etcd

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
)

// embeddedConfig is the default config with the embedded server moved to
// free ports and a temp dir (tests never use 2379).
func embeddedConfig(t *testing.T) Config {
	cfg := fastConfig()
	cfg.EmbeddedDataDir = filepath.Join(t.TempDir(), "etcd")
	cfg.EmbeddedClientURL = "http://127.0.0.1:0"
	cfg.EmbeddedPeerURL = "http://127.0.0.1:0"
	return cfg
}

func TestNoEndpointsStartsEmbeddedServer(t *testing.T) {
	g := NewWithT(t)
	cfg := embeddedConfig(t)
	p := newPlugin(t, cfg, nil) // no file, no ETCD_ENDPOINTS
	var early atomic.Int32
	p.OnConnect(func() error { early.Add(1); return nil })
	g.Expect(p.Init()).To(Succeed())
	g.Expect(early.Load()).To(BeEquivalentTo(1), "OnConnect registered before Init runs once connected")
	eff := p.Config()
	g.Expect(eff.Embedded).To(BeTrue())
	g.Expect(eff.Endpoints).To(HaveLen(1))
	g.Expect(eff.Endpoints[0]).To(MatchRegexp(`^127\.0\.0\.1:[1-9][0-9]*$`), "loopback only")
	g.Expect(eff.Endpoints[0]).NotTo(HaveSuffix(":2379"))
	g.Expect(filepath.Join(cfg.EmbeddedDataDir, "member")).To(BeADirectory(), "data in embedded-data-dir")

	g.Expect(p.Put(t.Context(), "k", []byte("v"))).To(Succeed())
	kv, found, err := p.Get(t.Context(), "k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(string(kv.Value)).To(Equal("v"))

	g.Expect(p.Close()).To(Succeed())
	_, err = net.DialTimeout("tcp", eff.Endpoints[0], time.Second)
	g.Expect(err).To(HaveOccurred(), "Close stops the embedded server")
}

func TestEnvEndpointsAreUsedWhenFileHasNone(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	env := func(k string) (string, bool) {
		if k == EnvEndpoints {
			return " ," + srv.Endpoint() + ", ", true
		}
		return "", false
	}
	p := NewPlugin(UseConf(fastConfig()), UseEnv(env), UseDeps(func(d *Deps) {
		d.Cfg, d.Log = config.NoFile, testLogger(t)
	}))
	g.Expect(p.Init()).To(Succeed())
	t.Cleanup(func() { _ = p.Close() })
	g.Expect(p.Config().Embedded).To(BeFalse())
	g.Expect(p.Config().Endpoints).To(Equal([]string{srv.Endpoint()}))
	g.Expect(p.Put(t.Context(), "via-env", nil)).To(Succeed())
	resp, err := srv.Client(t).Get(t.Context(), "via-env")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Kvs).To(HaveLen(1), "the write reached the server named by ETCD_ENDPOINTS")
}

func TestUnreachableEndpointFailsInit(t *testing.T) {
	g := NewWithT(t)
	ep := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := newPlugin(t, fastConfig(ep), nil)
	err := p.Init()
	g.Expect(err).To(MatchError(ContainSubstring(ep)))
	g.Expect(err).To(MatchError(ContainSubstring("dial-timeout 300ms")))
	g.Expect(p.Close()).To(Succeed(), "Close after a failed Init")
	g.Expect(p.Put(t.Context(), "k", nil)).To(MatchError(kvdb.ErrClosed))
}

func TestDelayedStartConnectsLater(t *testing.T) {
	g := NewWithT(t)
	port := freePort(t)
	cfg := fastConfig(fmt.Sprintf("127.0.0.1:%d", port))
	cfg.AllowDelayedStart = true
	rep := &fakeReporter{}
	p := newPlugin(t, cfg, rep)
	g.Expect(p.Init()).To(Succeed(), "allow-delayed-start: Init succeeds without etcd")
	t.Cleanup(func() { _ = p.Close() })

	var connects, reconnects atomic.Int32
	p.OnConnect(func() error { connects.Add(1); return nil })
	p.OnReconnect(func() { reconnects.Add(1) })
	g.Expect(p.AfterInit()).To(Succeed())
	g.Expect(connects.Load()).To(BeZero(), "queued until connected")
	g.Eventually(rep.last).Should(Equal(health.Error))
	g.Expect(rep.probe(g, "etcd")).To(Equal(health.Error))

	etcdtest.Start(t, etcdtest.WithPort(port))
	g.Eventually(connects.Load).WithTimeout(10 * time.Second).Should(BeEquivalentTo(1))
	g.Expect(rep.last()).To(Equal(health.OK))
	g.Expect(rep.probe(g, "etcd")).To(Equal(health.OK))
	g.Expect(reconnects.Load()).To(BeZero(), "the first connection is not a reconnect")

	var late atomic.Int32
	p.OnConnect(func() error { late.Add(1); return nil })
	g.Expect(late.Load()).To(BeEquivalentTo(1), "runs at once once connected")
	g.Consistently(connects.Load).WithTimeout(300*time.Millisecond).Should(BeEquivalentTo(1), "each callback runs once")
	g.Expect(p.Put(t.Context(), "k", nil)).To(Succeed())
}

func TestReconnectReportsHealthAndCallsOnReconnect(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	rep := &fakeReporter{}
	p := newPlugin(t, fastConfig(srv.Endpoint()), rep)
	var reconnects atomic.Int32
	p.OnReconnect(func() { reconnects.Add(1) })
	g.Expect(p.Init()).To(Succeed())
	t.Cleanup(func() { _ = p.Close() })
	g.Expect(p.AfterInit()).To(Succeed())
	g.Expect(rep.last()).To(Equal(health.OK))

	for cycle := int32(1); cycle <= 2; cycle++ {
		srv.Stop()
		g.Eventually(rep.last).WithTimeout(10*time.Second).Should(Equal(health.Error), "cycle %d: outage seen", cycle)
		g.Expect(rep.probe(g, "etcd")).To(Equal(health.Error))
		g.Expect(reconnects.Load()).To(Equal(cycle - 1))

		srv.Restart()
		g.Eventually(rep.last).WithTimeout(10*time.Second).Should(Equal(health.OK), "cycle %d: back", cycle)
		g.Expect(reconnects.Load()).To(Equal(cycle), "OnReconnect fires once per reconnect")
		g.Consistently(reconnects.Load).WithTimeout(300 * time.Millisecond).Should(Equal(cycle))
	}
	g.Expect(p.Put(t.Context(), "k", nil)).To(Succeed())
}

func TestNoResyncWhenDisabled(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	rep := &fakeReporter{}
	cfg := fastConfig(srv.Endpoint())
	cfg.ResyncAfterReconnect = false
	p := startPlugin(t, cfg, rep)
	var reconnects atomic.Int32
	p.OnReconnect(func() { reconnects.Add(1) })
	srv.Stop()
	g.Eventually(rep.last).WithTimeout(10 * time.Second).Should(Equal(health.Error))
	srv.Restart()
	g.Eventually(rep.last).WithTimeout(10 * time.Second).Should(Equal(health.OK))
	g.Expect(reconnects.Load()).To(BeZero())
}

func TestAutoCompactBreaksOldWatches(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cfg := fastConfig(srv.Endpoint())
	cfg.AutoCompact = 100 * time.Millisecond
	p := startPlugin(t, cfg, nil)
	ctx := t.Context()
	g.Expect(p.Put(ctx, "c", []byte("1"))).To(Succeed())
	kv, _, err := p.Get(ctx, "c")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Put(ctx, "c", []byte("2"))).To(Succeed())

	// Once compacted, a watch from the first revision cannot be served:
	// Watch fails with ErrCompacted or its channel closes without events.
	g.Eventually(func(g Gomega) {
		ch, err := p.Watch(ctx, "c", kv.Revision)
		if err != nil {
			g.Expect(err).To(MatchError(kvdb.ErrCompacted))
			return
		}
		ev, ok := <-ch
		g.Expect(ok).To(BeFalse(), "got %+v instead of a closed channel", ev)
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

func TestNewSessionUsesSessionTTL(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cfg := fastConfig(srv.Endpoint())
	cfg.SessionTTL = 1500 * time.Millisecond
	p := startPlugin(t, cfg, nil)
	s, err := p.NewSession(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	resp, err := srv.Client(t).TimeToLive(t.Context(), s.Lease())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GrantedTTL).To(BeEquivalentTo(2), "rounded up to whole seconds")
}

func TestClosed(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	srv := etcdtest.Start(t)
	p := newPlugin(t, fastConfig(srv.Endpoint()), nil)
	g.Expect(p.Put(ctx, "k", nil)).To(MatchError(kvdb.ErrClosed), "before Init")
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.AfterInit()).To(Succeed())
	ch, err := p.Watch(ctx, "", 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Close()).To(Succeed())
	g.Expect(p.Close()).To(Succeed(), "idempotent")
	g.Eventually(ch).Should(BeClosed(), "Close ends watches")

	g.Expect(p.Put(ctx, "k", nil)).To(MatchError(kvdb.ErrClosed))
	_, _, err = p.Get(ctx, "k")
	g.Expect(err).To(MatchError(kvdb.ErrClosed))
	_, _, err = p.List(ctx, "")
	g.Expect(err).To(MatchError(kvdb.ErrClosed))
	_, err = p.Delete(ctx, "k")
	g.Expect(err).To(MatchError(kvdb.ErrClosed))
	_, err = p.Txn(ctx, nil, []kvdb.Op{kvdb.PutOp("k", nil)})
	g.Expect(err).To(MatchError(kvdb.ErrClosed))
	_, err = p.Watch(ctx, "", 0)
	g.Expect(err).To(MatchError(kvdb.ErrClosed))
}

func TestSampleConfigFileLoads(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	data, err := os.ReadFile("etcd.conf")
	g.Expect(err).NotTo(HaveOccurred())
	conf := filepath.Join(dir, "etcd.conf")
	g.Expect(os.WriteFile(conf, data, 0o600)).To(Succeed())
	var cfg Config
	p := NewPlugin(UseEnv(noEnv), UseDeps(func(d *Deps) { d.Cfg = fileConfig(conf); d.Log = testLogger(t) }))
	cfg, err = p.loadConfig()
	g.Expect(err).NotTo(HaveOccurred())
	want := DefaultConfig()
	want.Normalize(noEnv)
	g.Expect(cfg).To(Equal(want), "the sample shows every key with its default")
}

// The start-up log says which etcd the agent uses: the endpoints, and
// whether it is the embedded server (with its data directory) or not.
func TestStartupLogNamesTheEtcdInUse(t *testing.T) {
	srv := etcdtest.Start(t)
	cases := []struct {
		name string
		cfg  func(t *testing.T) Config
		want func(p *Plugin) string
	}{
		{"embedded", embeddedConfig, func(p *Plugin) string {
			return fmt.Sprintf(`msg="using etcd: embedded server, private to this agent" embedded=true endpoints=[%s] data-dir=%s`,
				p.Config().Endpoints[0], p.Config().EmbeddedDataDir)
		}},
		{"external", func(*testing.T) Config { return fastConfig(srv.Endpoint()) }, func(*Plugin) string {
			return fmt.Sprintf(`msg="using etcd: external cluster" embedded=false endpoints=[%s] tls=false`, srv.Endpoint())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out := &syncBuffer{}
			p := NewPlugin(UseConf(tc.cfg(t)), UseEnv(noEnv), UseDeps(func(d *Deps) {
				d.Cfg, d.Log = config.NoFile, slog.New(slog.NewTextHandler(out, nil))
			}))
			g.Expect(p.Init()).To(Succeed())
			defer func() { g.Expect(p.Close()).To(Succeed()) }()
			g.Expect(out.String()).To(ContainSubstring(tc.want(p)))
		})
	}
}
