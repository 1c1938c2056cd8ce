package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/infra/agent"
	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// burstPods is the size of the burst of deletes; burstUpdated of those
// pods are updated once before they are deleted.
const (
	burstPods    = 10000
	burstUpdated = 100
)

// seenChange is one change as the handler saw it.
type seenChange struct {
	prevIP, newIP string // "" for no value
}

// burstHandler records every Kubernetes state change per key, in the
// order it sees them. The first change waits for gate, so that the loop
// stays busy while the watcher receives the burst.
type burstHandler struct {
	gate     chan struct{}
	gateOnce sync.Once

	mu      sync.Mutex
	resyncs []int // pods in each resync's state
	perKey  map[string][]seenChange
	deletes int
}

func newBurstHandler() *burstHandler {
	return &burstHandler{gate: make(chan struct{}), perKey: map[string][]seenChange{}}
}

// open lets the handler go on; safe to call twice.
func (h *burstHandler) open() { h.gateOnce.Do(func() { close(h.gate) }) }

// firstResync returns the pods of the first resync (0 before it).
func (h *burstHandler) firstResync() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.resyncs) == 0 {
		return 0
	}
	return h.resyncs[0]
}

func (h *burstHandler) String() string              { return "burst" }
func (h *burstHandler) HandlesEvent(api.Event) bool { return true }
func (h *burstHandler) Revert(api.Event) error      { return nil }

func (h *burstHandler) Resync(_ api.Event, ks api.KubeStateData, _ int, _ api.ResyncOperations) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resyncs = append(h.resyncs, len(ks["pod"]))
	return nil
}

func (h *burstHandler) Update(ev api.Event, _ api.UpdateOperations) (string, error) {
	ksc, ok := ev.(*api.KubeStateChange)
	if !ok {
		return "", nil
	}
	<-h.gate
	h.mu.Lock()
	defer h.mu.Unlock()
	h.perKey[ksc.Key] = append(h.perKey[ksc.Key], seenChange{prevIP: podIP(ksc.PrevValue), newIP: podIP(ksc.NewValue)})
	if ksc.NewValue == nil {
		h.deletes++
	}
	return "", nil
}

// counts returns the resyncs and deletes seen so far.
func (h *burstHandler) counts() (resyncs, deletes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.resyncs), h.deletes
}

func (h *burstHandler) changesOf(key string) []seenChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]seenChange(nil), h.perKey[key]...)
}

func podIP(m proto.Message) string {
	if p, ok := m.(*podmodel.Pod); ok {
		return p.IpAddress
	}
	return ""
}

func burstPodKey(i int) string { return podmodel.Key(fmt.Sprintf("pod-%05d", i), "burst") }

func burstPod(t *testing.T, i int, ip string) string {
	t.Helper()
	data, err := codec.Marshal(&podmodel.Pod{Name: fmt.Sprintf("pod-%05d", i), Namespace: "burst", IpAddress: ip})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// inBatches runs etcd transactions of at most kvdb.MaxTxnOps ops, op(i)
// for i in [0, n).
func inBatches(t *testing.T, cli *clientv3.Client, n int, op func(i int) clientv3.Op) {
	t.Helper()
	for start := 0; start < n; start += kvdb.MaxTxnOps {
		var ops []clientv3.Op
		for i := start; i < min(n, start+kvdb.MaxTxnOps); i++ {
			ops = append(ops, op(i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			t.Fatalf("etcd txn at op %d: %v", start, err)
		}
	}
}

// A burst of 10,000 pod deletes while the loop is busy: the DB watcher
// waits for room in the loop's queue instead of dropping changes, so the
// handler sees every delete exactly once, as a change (no resync), and the
// changes of one key in etcd's order.
func TestBurstOfDeletesLosesNothing(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	inBatches(t, cli, burstPods, func(i int) clientv3.Op {
		return clientv3.OpPut(codec.KSRPrefix+burstPodKey(i), burstPod(t, i, fmt.Sprintf("10.1.%d.%d", i/250, i%250)))
	})

	h := newBurstHandler()
	p := startBurstStack(t, srv.Endpoint(), h)
	t.Cleanup(h.open) // registered after the stack's: runs before its Stop
	g.Eventually(func() int { n, _ := h.counts(); return n }).WithTimeout(30*time.Second).Should(Equal(1), "first DB resync")
	g.Expect(h.firstResync()).To(Equal(burstPods))

	start := time.Now()
	inBatches(t, cli, burstUpdated, func(i int) clientv3.Op {
		return clientv3.OpPut(codec.KSRPrefix+burstPodKey(i), burstPod(t, i, "10.9.0.1"))
	})
	inBatches(t, cli, burstPods, func(i int) clientv3.Op {
		return clientv3.OpDelete(codec.KSRPrefix + burstPodKey(i))
	})
	// The loop is blocked in the handler: the queue fills up.
	g.Eventually(func() int { return len(p.loop.queue) }).WithTimeout(30*time.Second).
		Should(Equal(cap(p.loop.queue)), "queue full while the handler waits")
	h.open()

	// Done when every delete arrived, or when a resync shows that the
	// watcher gave up on changes.
	g.Eventually(func() bool {
		resyncs, deletes := h.counts()
		return deletes == burstPods || resyncs > 1
	}).WithTimeout(2 * time.Minute).WithPolling(50 * time.Millisecond).Should(BeTrue())
	took := time.Since(start)
	resyncs, deletes := h.counts()
	t.Logf("burst of %d deletes (+%d updates): %d deletes handled, %d DB resyncs, in %s",
		burstPods, burstUpdated, deletes, resyncs, took)
	g.Expect(resyncs).To(Equal(1), "no resync needed: no change was dropped")
	g.Expect(deletes).To(Equal(burstPods), "deletes lost: %d", burstPods-deletes)
	for i := range burstPods {
		want := []seenChange{{prevIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250)}}
		if i < burstUpdated {
			want = []seenChange{{prevIP: want[0].prevIP, newIP: "10.9.0.1"}, {prevIP: "10.9.0.1"}}
		}
		g.Expect(h.changesOf(burstPodKey(i))).To(Equal(want), "changes of %s", burstPodKey(i))
	}
}

// startBurstStack runs etcd (client), bolt and the controller with h.
func startBurstStack(t *testing.T, endpoint string, h api.EventHandler) *Plugin {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ec := etcd.DefaultConfig()
	ec.Endpoints = []string{endpoint}
	ec.DialTimeout = 3 * time.Second
	// A probe that times out on a loaded machine must not look like a
	// reconnect: its resync would stand in for the changes under test.
	ec.ResyncAfterReconnect = false
	etcdP := etcd.NewPlugin(etcd.UseConf(ec), etcd.UseEnv(func(string) (string, bool) { return "", false }),
		etcd.UseDeps(func(d *etcd.Deps) { d.Cfg, d.Log = config.NoFile, quiet }))
	bc := bolt.DefaultConfig()
	bc.DBPath = filepath.Join(t.TempDir(), "bolt.db")
	boltP := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, quiet }))
	cc := DefaultConfig()
	cc.DelayLocalResync = time.Minute
	p := NewPlugin(UseConf(cc), UseHandlers(h), UseDeps(func(d *Deps) {
		d.Cfg, d.Log = config.NoFile, quiet
		d.RemoteDB, d.LocalDB = etcdP, boltP
	}))
	a, err := agent.NewAgent(agent.Plugins(etcdP, boltP, p), agent.Args(nil), agent.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	return p
}
