package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
)

// poolRig is a real etcd, a fake clientset with a running node informer,
// and a watcher that checks every revision of the grants.
type poolRig struct {
	db     kvdb.Broker
	client *fake.Clientset
	nodes  coreinformers.NodeInformer
	events *record.FakeRecorder
	hist   *grantHistory
	log    *slog.Logger
	// servers counts the servers built; each logs with its number.
	servers int
	// grace and clock time the fences of the servers built (a short grace
	// on the real clock unless a test sets them).
	grace time.Duration
	clock clock.WithDelayedExecution
}

func newPoolRig(t *testing.T, nodes ...string) *poolRig {
	t.Helper()
	r := &poolRig{db: etcdBroker(t), client: fake.NewClientset(), events: record.NewFakeRecorder(1000), log: testLogger(t),
		grace: 20 * time.Millisecond, clock: clock.RealClock{}}
	for _, n := range nodes {
		r.createNode(t, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory, informer := startInformer(ctx, r.client)
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	r.nodes = informer
	r.hist = watchGrants(t, r.db)
	return r
}

// poolConfig cuts /26 and /120 blocks from the ranges, at most 8 per
// node and family.
func poolConfig(ranges ...string) PoolBlockConfig {
	c := DefaultPoolBlockConfig()
	c.ClusterCIDRs = ranges
	return c
}

// poolServer is a server that runs until stop (or the test's end).
type poolServer struct {
	*PoolBlockServer
	metrics *PoolBlockMetrics
	ctx     context.Context
	cancel  func()
	done    chan error
	once    sync.Once
	ran     bool
	err     error
}

// start builds a server on the rig's etcd, starts it (retrying while etcd
// fails) and runs it.
func (r *poolRig) start(t *testing.T, cfg PoolBlockConfig, fence func() []kvdb.Cmp) *poolServer {
	t.Helper()
	return r.startOn(t, r.db, cfg, fence)
}

func (r *poolRig) startOn(t *testing.T, db kvdb.Broker, cfg PoolBlockConfig, fence func() []kvdb.Cmp) *poolServer {
	t.Helper()
	ps := r.prepare(t, db, cfg, fence)
	ps.run()
	return ps
}

// prepare builds a server and starts it (retrying while etcd fails); it
// does not run it.
func (r *poolRig) prepare(t *testing.T, db kvdb.Broker, cfg PoolBlockConfig, fence func() []kvdb.Cmp) *poolServer {
	t.Helper()
	m := NewPoolBlockMetrics()
	s, err := NewPoolBlockServer(PoolBlockParams{DB: db, Fence: fence, Client: r.client, Nodes: r.nodes, Config: cfg,
		Metrics: m, Log: r.log.With("server", r.servers), Recorder: r.events, InitialRetry: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		AgentGrace: r.grace, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for {
		err := s.Start(ctx)
		if err == nil {
			break
		}
		r.log.Info("test: start failed; retrying", "err", err)
		time.Sleep(5 * time.Millisecond)
	}
	r.servers++
	ps := &poolServer{PoolBlockServer: s, metrics: m, ctx: ctx, cancel: cancel, done: make(chan error, 1)}
	t.Cleanup(func() { ps.stop() })
	return ps
}

// run runs the server until stop.
func (s *poolServer) run() {
	s.ran = true
	go func() { s.done <- s.Run(s.ctx) }()
}

// stop ends Run and returns what it returned (nil if it never ran).
func (s *poolServer) stop() error {
	s.once.Do(func() {
		s.cancel()
		if !s.ran {
			return
		}
		select {
		case s.err = <-s.done:
		case <-time.After(10 * time.Second):
			s.err = errors.New("test: Run did not return within 10s of its context's end")
		}
	})
	return s.err
}

func (r *poolRig) createNode(t *testing.T, name string) {
	t.Helper()
	if _, err := r.client.CoreV1().Nodes().Create(context.Background(), node(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *poolRig) deleteNode(t *testing.T, name string) {
	t.Helper()
	if err := r.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// claim writes node's claim as its agent would.
func (r *poolRig) claim(t *testing.T, node string, v4, v6 int, release ...string) {
	t.Helper()
	putClaim(t, r.db, poolblock.Claim{Node: node, Want: map[string]int{"ipv4": v4, "ipv6": v6}, Release: mustPrefixes(release...)})
}

func putClaim(t *testing.T, db kvdb.Broker, c poolblock.Claim) {
	t.Helper()
	value, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put(context.Background(), claimKey(c.Node), value); err != nil {
		t.Fatal(err)
	}
}

// grant reads node's grant from etcd: its blocks, and whether there is one.
func (r *poolRig) grant(g Gomega, node string) []string {
	blocks, _ := readGrant(g, r.db, node)
	return blocks
}

func readGrant(g Gomega, db kvdb.Broker, node string) ([]string, bool) {
	kv, found, err := db.Get(context.Background(), grantKey(node))
	g.Expect(err).NotTo(HaveOccurred())
	if !found {
		return nil, false
	}
	gr, err := poolblock.ParseGrant(kv.Value)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gr.Node).To(Equal(node))
	out := []string{}
	for _, b := range gr.Blocks {
		out = append(out, b.String())
	}
	return out, true
}

func (r *poolRig) exists(g Gomega, key string) bool {
	_, found, err := r.db.Get(context.Background(), key)
	g.Expect(err).NotTo(HaveOccurred())
	return found
}

// eventReasons drains the recorder.
func (r *poolRig) eventReasons() []string { return reasons(r.events) }

// grantHistory replays every change of the grants in revision order and
// records each revision at which one block is in two grants.
type grantHistory struct {
	mu         sync.Mutex
	grants     map[string][]netip.Prefix
	allowed    map[netip.Prefix]bool
	rev        int64
	violations []string
}

// watchGrants starts the history from the grants etcd holds now.
func watchGrants(t *testing.T, db kvdb.Broker) *grantHistory {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kvs, rev, err := db.List(ctx, grantPrefix)
	if err != nil {
		t.Fatal(err)
	}
	h := &grantHistory{grants: make(map[string][]netip.Prefix), allowed: make(map[netip.Prefix]bool), rev: rev}
	for _, kv := range kvs {
		h.apply(kvdb.WatchEvent{Type: kvdb.EventPut, Key: kv.Key, Value: kv.Value, Revision: rev})
	}
	ch, err := db.Watch(ctx, grantPrefix, rev+1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			h.apply(ev)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *grantHistory) apply(ev kvdb.WatchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	node := strings.TrimPrefix(ev.Key, grantPrefix)
	h.rev = ev.Revision
	if ev.Type == kvdb.EventDelete {
		delete(h.grants, node)
		return
	}
	g, err := poolblock.ParseGrant(ev.Value)
	if err != nil {
		h.violations = append(h.violations, fmt.Sprintf("rev %d: %v", ev.Revision, err))
		return
	}
	h.grants[node] = g.Blocks
	owner := make(map[netip.Prefix]string)
	for _, n := range slices.Sorted(maps.Keys(h.grants)) {
		for _, b := range h.grants[n] {
			if o, ok := owner[b]; ok && o != n && !h.allowed[b] {
				h.violations = append(h.violations, fmt.Sprintf("rev %d: block %s in the grants of %s and %s", ev.Revision, b, o, n))
			}
			owner[b] = n
		}
	}
}

// allow exempts block b from the check (a test's corrupt double grant).
func (h *grantHistory) allow(b netip.Prefix) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.allowed[b] = true
}

// check asserts that no revision so far had a block in two grants.
func (h *grantHistory) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.violations) > 0 {
		t.Fatalf("double grants:\n%s", strings.Join(h.violations, "\n"))
	}
}
