package controller_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/infra/rest/resttest"
	"github.com/contiv-ipam/agent/plugins/controller"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/node"
)

func noEnv(string) (string, bool) { return "", false }

// recorder is an event handler that records every event it sees.
type recorder struct {
	mu     sync.Mutex
	events []api.Event
}

func (r *recorder) String() string              { return "recorder" }
func (r *recorder) HandlesEvent(api.Event) bool { return true }
func (r *recorder) Revert(api.Event) error      { return nil }
func (r *recorder) add(ev api.Event)            { r.mu.Lock(); r.events = append(r.events, ev); r.mu.Unlock() }
func (r *recorder) Update(ev api.Event, txn api.UpdateOperations) (string, error) {
	r.add(ev)
	if ksc, ok := ev.(*api.KubeStateChange); ok && ksc.NewValue != nil {
		txn.Put("recorder/"+ksc.Key, ksc.NewValue)
	}
	return "recorded", nil
}

func (r *recorder) Resync(ev api.Event, ks api.KubeStateData, _ int, txn api.ResyncOperations) error {
	r.add(ev)
	for key, v := range ks["node"] {
		txn.Put("recorder/"+key, v)
	}
	return nil
}

func (r *recorder) list() []api.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.Event(nil), r.events...)
}

// resyncs returns the DB resyncs seen so far.
func (r *recorder) resyncs() []*api.DBResync {
	var out []*api.DBResync
	for _, ev := range r.list() {
		if db, ok := ev.(*api.DBResync); ok {
			out = append(out, db)
		}
	}
	return out
}

// changes returns the kube state changes seen so far.
func (r *recorder) changes() []*api.KubeStateChange {
	var out []*api.KubeStateChange
	for _, ev := range r.list() {
		if c, ok := ev.(*api.KubeStateChange); ok {
			out = append(out, c)
		}
	}
	return out
}

// stack is etcd + bolt + controller under one agent.
type stack struct {
	etcd  *etcd.Plugin
	bolt  *bolt.Plugin
	ctrl  *controller.Plugin
	rec   *recorder
	http  *resttest.Server
	agent *agent.Agent
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startStack runs the plugins; etcdCfg says which etcd; boltPath is the mirror.
func startStack(t *testing.T, etcdCfg etcd.Config, boltPath string) *stack {
	t.Helper()
	s := &stack{rec: &recorder{}, http: resttest.New(t)}
	s.etcd = etcd.NewPlugin(etcd.UseConf(etcdCfg), etcd.UseEnv(noEnv), etcd.UseDeps(func(d *etcd.Deps) {
		d.Cfg, d.Log = config.NoFile, quietLog()
	}))
	bc := bolt.DefaultConfig()
	bc.DBPath = boltPath
	s.bolt = bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, quietLog() }))
	cc := controller.DefaultConfig()
	cc.DelayLocalResync = 300 * time.Millisecond
	cc.StartupResyncDeadline = 20 * time.Second
	s.ctrl = controller.NewPlugin(controller.UseConf(cc), controller.UseHandlers(s.rec),
		controller.UseDeps(func(d *controller.Deps) {
			d.Cfg, d.Log = config.NoFile, quietLog()
			d.RemoteDB, d.LocalDB, d.HTTP = s.etcd, s.bolt, s.http.Plugin
		}))
	a, err := agent.NewAgent(agent.Plugins(s.etcd, s.bolt, s.ctrl), agent.Args(nil), agent.Logger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	s.agent = a
	t.Cleanup(func() { _ = a.Stop() })
	return s
}

func fastEtcd(endpoint string) etcd.Config {
	c := etcd.DefaultConfig()
	c.Endpoints = []string{endpoint}
	c.DialTimeout = 3 * time.Second
	c.ReconnectInterval = 100 * time.Millisecond
	c.ProbeInterval = 100 * time.Millisecond
	return c
}

func putNode(t *testing.T, srv *etcdtest.Server, n *node.Node) {
	t.Helper()
	data, err := codec.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := srv.Client(t).Put(ctx, codec.KSRPrefix+node.Key(n.Name), string(data)); err != nil {
		t.Fatal(err)
	}
}

func TestKubeStateFromEtcdReachesHandlers(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	n1 := &node.Node{Name: "n1", Pod_CIDR: "10.1.1.0/24"}
	putNode(t, srv, n1)
	s := startStack(t, fastEtcd(srv.Endpoint()), filepath.Join(t.TempDir(), "bolt.db"))

	g.Eventually(s.rec.resyncs, 10*time.Second).Should(HaveLen(1))
	first := s.rec.list()[0].(*api.DBResync)
	g.Expect(first.Local).To(BeFalse())
	g.Expect(proto.Equal(first.KubeState["node"][node.Key("n1")], n1)).To(BeTrue())

	n1b := &node.Node{Name: "n1", Pod_CIDR: "10.1.9.0/24"}
	putNode(t, srv, n1b)
	g.Eventually(s.rec.changes, 10*time.Second).Should(HaveLen(1))
	change := s.rec.changes()[0]
	g.Expect(change.Resource).To(Equal("node"))
	g.Expect(change.Key).To(Equal(node.Key("n1")))
	g.Expect(proto.Equal(change.PrevValue, n1)).To(BeTrue(), "previous value")
	g.Expect(proto.Equal(change.NewValue, n1b)).To(BeTrue())

	// The change is in the desired config and in the event history.
	g.Eventually(func() string { _, b := s.http.Get(controller.ConfigPath); return b }).
		Should(ContainSubstring("10.1.9.0/24"))
	_, body := s.http.Get(controller.EventHistoryPath)
	g.Expect(body).To(ContainSubstring(`"Name": "Kubernetes State Change"`))
	g.Expect(body).To(ContainSubstring(`"Change": "recorded"`))
}

func TestEtcdRestartYieldsANewDBResync(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	s := startStack(t, fastEtcd(srv.Endpoint()), filepath.Join(t.TempDir(), "bolt.db"))
	g.Eventually(s.rec.resyncs, 10*time.Second).Should(HaveLen(1))
	srv.Restart()
	putNode(t, srv, &node.Node{Name: "after-restart"})
	g.Eventually(func() int { return len(s.rec.resyncs()) }, 15*time.Second).Should(BeNumerically(">=", 2))
	g.Eventually(func() bool {
		for _, db := range s.rec.resyncs()[1:] {
			if _, ok := db.KubeState["node"][node.Key("after-restart")]; ok {
				return true
			}
		}
		for _, c := range s.rec.changes() {
			if c.Key == node.Key("after-restart") {
				return true
			}
		}
		return false
	}, 10*time.Second).Should(BeTrue(), "the node written around the restart reaches the handlers")
}

func TestStartWithEtcdDownFallsBackToTheBoltMirror(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	n1 := &node.Node{Name: "n1", Pod_CIDR: "10.1.1.0/24"}
	putNode(t, srv, n1)
	boltPath := filepath.Join(t.TempDir(), "bolt.db")

	first := startStack(t, fastEtcd(srv.Endpoint()), boltPath)
	g.Eventually(first.rec.resyncs, 10*time.Second).Should(HaveLen(1))
	g.Expect(first.agent.Stop()).To(Succeed())
	srv.Stop()

	down := fastEtcd(srv.Endpoint())
	down.AllowDelayedStart = true
	second := startStack(t, down, boltPath)
	g.Eventually(second.rec.resyncs, 10*time.Second).Should(HaveLen(1))
	local := second.rec.resyncs()[0]
	g.Expect(local.Local).To(BeTrue())
	g.Expect(proto.Equal(local.KubeState["node"][node.Key("n1")], n1)).To(BeTrue())

	srv.Restart()
	g.Eventually(func() bool {
		rs := second.rec.resyncs()
		return len(rs) >= 2 && !rs[len(rs)-1].Local
	}, 15*time.Second).Should(BeTrue(), "a remote resync follows once etcd is up")
}
