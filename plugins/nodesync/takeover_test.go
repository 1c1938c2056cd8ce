package nodesync_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// openBolt opens the bolt file at path (created if absent), closed at
// cleanup; lock is its lock timeout.
func openBolt(t testing.TB, path string, lock time.Duration) (*bolt.Plugin, error) {
	t.Helper()
	bc := bolt.DefaultConfig()
	bc.DBPath, bc.LockTimeout = path, lock
	b := bolt.NewPlugin(bolt.UseConf(bc), bolt.UseDeps(func(d *bolt.Deps) {
		d.Cfg, d.Log = config.NoFile, slog.New(slog.DiscardHandler)
	}))
	if err := b.Init(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, nil
}

// agentRun is one run of an agent on a bolt file: its own etcd client,
// its bolt plugin, and nodesync over both. kill ends it the way SIGKILL
// does: the etcd client stops without revoking anything, and the bolt
// file's lock is released.
type agentRun struct {
	db    *etcd.Plugin
	local *bolt.Plugin
	p     *nodesync.Plugin
}

// startRun starts a run of node-x on the bolt file at path; wrap, if not
// nil, gives the Presence store from the run's etcd client and bolt.
func startRun(t *testing.T, srv *etcdtest.Server, path string, wrap func(*etcd.Plugin, kvdb.Broker) kvdb.PresenceStore,
	opts ...nodesync.Option) agentRun {
	t.Helper()
	local, err := openBolt(t, path, 5*time.Second)
	if err != nil {
		t.Fatalf("bolt Init: %v", err)
	}
	db := newDB(t, srv)
	opts = append([]nodesync.Option{withLocalDB(local)}, opts...)
	if wrap != nil {
		opts = append(opts, withPresence(wrap(db, local)))
	}
	return agentRun{db: db, local: local, p: newPlugin(t, "node-x", db, &loop{}, opts...)}
}

func (r agentRun) kill(t *testing.T) {
	t.Helper()
	if err := r.db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.local.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawPresence is the presence key of node-x as etcd holds it.
func rawPresence(t *testing.T, cli *clientv3.Client) (value string, rev int64, lease clientv3.LeaseID) {
	t.Helper()
	resp, err := cli.Get(t.Context(), nodesync.PresencePrefix+"node-x")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("presence of node-x: %d keys", len(resp.Kvs))
	}
	kv := resp.Kvs[0]
	return string(kv.Value), kv.ModRevision, clientv3.LeaseID(kv.Lease)
}

// holderOf decodes a presence value.
func holderOf(t *testing.T, value string) nodesync.Holder {
	t.Helper()
	var h nodesync.Holder
	if err := json.Unmarshal([]byte(value), &h); err != nil {
		t.Fatalf("presence value %q: %v", value, err)
	}
	return h
}

// storedInstance reads InstanceKey from b ("" when absent).
func storedInstance(t testing.TB, b kvdb.Broker) string {
	t.Helper()
	kv, found, err := b.Get(context.Background(), nodesync.InstanceKey)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		return ""
	}
	return string(kv.Value)
}

// presenceSpy is a PresenceStore that records what each claim was
// called with, and the instance LocalDB held at that moment; before, if
// set, runs before a TakeOverPresence is passed on.
type presenceSpy struct {
	kvdb.PresenceStore
	local  kvdb.Broker
	before func(rev int64)

	mu        sync.Mutex
	claims    []string // values of ClaimPresence calls
	stored    []string // InstanceKey in local at each call
	takeOvers []int64  // revisions of TakeOverPresence calls
}

func (s *presenceSpy) ClaimPresence(ctx context.Context, key string, value []byte, ttl time.Duration) (kvdb.Presence, error) {
	s.record(ctx, value)
	return s.PresenceStore.ClaimPresence(ctx, key, value, ttl)
}

func (s *presenceSpy) TakeOverPresence(ctx context.Context, key string, value []byte, ttl time.Duration, rev int64) (kvdb.Presence, error) {
	s.mu.Lock()
	s.takeOvers = append(s.takeOvers, rev)
	s.mu.Unlock()
	if s.before != nil {
		s.before(rev)
	}
	return s.PresenceStore.TakeOverPresence(ctx, key, value, ttl, rev)
}

func (s *presenceSpy) record(ctx context.Context, value []byte) {
	inst := ""
	if s.local != nil {
		if kv, found, err := s.local.Get(ctx, nodesync.InstanceKey); err == nil && found {
			inst = string(kv.Value)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = append(s.claims, string(value))
	s.stored = append(s.stored, inst)
}

func (s *presenceSpy) calls() (claims, stored []string, takeOvers []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.claims...), append([]string(nil), s.stored...), append([]int64(nil), s.takeOvers...)
}

func withPresence(ps kvdb.PresenceStore) nodesync.Option {
	return nodesync.UseDeps(func(d *nodesync.Deps) { d.Presence = ps })
}

// An agent killed with its presence lease alive (default TTL, 15s)
// restarts on the same bolt file and claims at once: the new run takes
// its predecessor's key over (same instance, new value, new lease) while
// the killed lease is still alive, and keeps node ID 1. The instance is
// stored in bolt before the first claim carries it, and stays the same
// across runs.
func TestRestartOnTheSameBoltFileTakesOverThePresence(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	raw := srv.Client(t)
	path := filepath.Join(t.TempDir(), "bolt.db")

	first := startRun(t, srv, path, nil)
	g.Expect(resync(first.p, nil)).To(Succeed())
	g.Expect(first.p.GetNodeID()).To(Equal(uint32(1)))
	killedValue, killedRev, killedLease := rawPresence(t, raw)
	instance := storedInstance(t, first.local)
	g.Expect(instance).To(MatchRegexp(`^[A-Z2-7]{26}$`), "a new instance is stored")
	g.Expect(holderOf(t, killedValue).Instance).To(Equal(instance))
	first.kill(t)

	spy := &presenceSpy{}
	second := startRun(t, srv, path, func(db *etcd.Plugin, local kvdb.Broker) kvdb.PresenceStore {
		spy.PresenceStore, spy.local = db, local
		return spy
	})
	restarted := second.p
	start := time.Now()
	g.Expect(resync(restarted, nil)).To(Succeed())
	took := time.Since(start)
	t.Logf("the restarted agent claimed %v after its resync began (TTL %v)", took, nodesync.DefaultPresenceTTL)
	g.Expect(took).To(BeNumerically("<", nodesync.DefaultPresenceTTL/5), "claimed well within the TTL")
	g.Expect(restarted.GetNodeID()).To(Equal(uint32(1)), "the node keeps its ID")

	value, rev, lease := rawPresence(t, raw)
	h := holderOf(t, value)
	g.Expect(value).NotTo(Equal(killedValue), "the new run's own value")
	g.Expect(h.Instance).To(Equal(instance), "the same bolt file, the same instance")
	g.Expect(rev).To(BeNumerically(">", killedRev))
	g.Expect(lease).NotTo(Equal(killedLease), "bound to the new run's lease")
	alive, err := raw.TimeToLive(t.Context(), killedLease)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alive.TTL).To(BeNumerically(">", 0), "taken over while the killed lease was still alive: nothing waited for it")

	claims, stored, takeOvers := spy.calls()
	g.Expect(takeOvers).To(Equal([]int64{killedRev}), "one take-over, at the revision the killed run wrote")
	g.Expect(claims).To(Equal([]string{value}))
	g.Expect(stored).To(Equal([]string{instance}), "the instance is in bolt before a claim carries it")
	g.Expect(storedInstance(t, second.local)).To(Equal(instance))

	_, err = raw.Revoke(t.Context(), killedLease) // what its expiry does
	g.Expect(err).NotTo(HaveOccurred())
	now, _, _ := rawPresence(t, raw)
	g.Expect(now).To(Equal(value), "the killed lease no longer holds the key")
}

// A second agent with the same node name but its own bolt file is
// refused while the first lives, exactly as without instances; the first
// agent's bolt file cannot even be opened meanwhile (the lock that makes
// a take-over safe).
func TestSameNameOnAnotherBoltFileIsRefused(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	raw := srv.Client(t)
	dir := t.TempDir()
	first := startRun(t, srv, filepath.Join(dir, "first.db"), nil, withTTL(time.Second))
	g.Expect(resync(first.p, nil)).To(Succeed())
	holding, _, _ := rawPresence(t, raw)

	_, err := openBolt(t, filepath.Join(dir, "first.db"), 100*time.Millisecond)
	g.Expect(err).To(MatchError(ContainSubstring("first.db")), "the live agent's bolt file is locked")

	second := startRun(t, srv, filepath.Join(dir, "second.db"), nil, withTTL(time.Second))
	err = resync(second.p, nil)
	expectTaken(g, err, "node-x", holderOf(t, holding))
	expectLost(g, second.p, "node-x")
	g.Expect(storedInstance(t, second.local)).NotTo(Equal(storedInstance(t, first.local)), "each bolt file its own instance")
	still, _, _ := rawPresence(t, raw)
	g.Expect(still).To(Equal(holding), "the first agent's presence is untouched")
	g.Expect(first.p.GetNodeID()).To(Equal(uint32(1)))
}

// A presence that does not carry this bolt file's instance is waited for
// as before instances, even when its holder is dead: a value of an agent
// that predates instances, one of another bolt file, one that does not
// decode. The lease (2s, kept alive by nobody) expires and the agent
// claims after it, never before.
func TestPresenceOfAnotherInstanceIsWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
	}{
		{"older agent without instance", `{"node":"node-x","host":"old","pid":7,"started":"2026-01-01T00:00:00Z"}`},
		{"another bolt file", `{"node":"node-x","host":"old","pid":7,"started":"2026-01-01T00:00:00Z","instance":"AAAAAAAAAAAAAAAAAAAAAAAAAA"}`},
		{"undecodable", `not json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			srv := etcdtest.Start(t)
			raw := srv.Client(t)
			run := startRun(t, srv, filepath.Join(t.TempDir(), "bolt.db"), nil, withTTL(time.Second))
			g.Expect(storedInstance(t, run.local)).To(BeEmpty())
			grant, err := raw.Grant(t.Context(), 2)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = raw.Put(t.Context(), nodesync.PresencePrefix+"node-x", tc.value, clientv3.WithLease(grant.ID))
			g.Expect(err).NotTo(HaveOccurred())
			expires := time.Now().Add(time.Second) // at least this much of the 2s remains

			g.Expect(resync(run.p, nil)).To(Succeed())
			g.Expect(time.Now()).To(BeTemporally(">=", expires), "claimed only after the stale lease expired")
			value, _, _ := rawPresence(t, raw)
			g.Expect(holderOf(t, value).Instance).To(Equal(storedInstance(t, run.local)))
			g.Expect(holderOf(t, value).Instance).NotTo(BeEmpty())
		})
	}
}

// The presence key changes between the read that found the killed run's
// value and the take-over (pinned by the spy): the take-over compares the
// revision it read, so the newer value is never overwritten.
//
//   - another live agent (its key never expires): refused at once, its
//     value intact;
//   - a late write carrying this bolt file's instance (a killed agent's
//     request applied after the read; its lease is kept alive by
//     nobody): not taken over a second time, but waited for like any
//     other holder, then claimed.
func TestTakeOverNeverOverwritesAConcurrentWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rewrite func(t *testing.T, raw *clientv3.Client, instance string) string
		taken   bool // refused (else claimed after the rewrite's lease)
	}{
		{"another live agent", func(t *testing.T, raw *clientv3.Client, _ string) string {
			v := `{"node":"node-x","host":"elsewhere","pid":9,"started":"2026-01-01T00:00:00Z"}`
			if _, err := raw.Put(t.Context(), nodesync.PresencePrefix+"node-x", v); err != nil { // no lease: never expires
				t.Error(err)
			}
			return v
		}, true},
		{"a late write of this instance", func(t *testing.T, raw *clientv3.Client, instance string) string {
			v := `{"node":"node-x","host":"here","pid":8,"started":"2026-01-01T00:00:00Z","instance":"` + instance + `"}`
			grant, err := raw.Grant(t.Context(), 2)
			if err == nil {
				_, err = raw.Put(t.Context(), nodesync.PresencePrefix+"node-x", v, clientv3.WithLease(grant.ID))
			}
			if err != nil {
				t.Error(err)
			}
			return v
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			srv := etcdtest.Start(t)
			raw := srv.Client(t)
			path := filepath.Join(t.TempDir(), "bolt.db")
			first := startRun(t, srv, path, nil, withTTL(time.Second))
			g.Expect(resync(first.p, nil)).To(Succeed())
			instance := storedInstance(t, first.local)
			_, killedRev, _ := rawPresence(t, raw)
			first.kill(t)

			var rewritten string
			var rewrittenRev int64
			spy := &presenceSpy{before: func(int64) {
				rewritten = tc.rewrite(t, raw, instance)
				_, rewrittenRev, _ = rawPresence(t, raw)
			}}
			p := startRun(t, srv, path, func(db *etcd.Plugin, _ kvdb.Broker) kvdb.PresenceStore {
				spy.PresenceStore = db
				return spy
			}, withTTL(time.Second)).p
			start := time.Now()
			err := resync(p, nil)
			_, _, takeOvers := spy.calls()
			g.Expect(takeOvers).To(Equal([]int64{killedRev}), "one take-over, at the killed run's revision")
			g.Expect(rewrittenRev).To(BeNumerically(">", killedRev))

			value, rev, _ := rawPresence(t, raw)
			if tc.taken {
				expectTaken(g, err, "node-x", holderOf(t, rewritten))
				expectLost(g, p, "node-x")
				g.Expect(value).To(Equal(rewritten), "the concurrent write is intact")
				g.Expect(rev).To(Equal(rewrittenRev), "and never written again")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(time.Since(start)).To(BeNumerically(">=", time.Second), "the late write's lease was waited for")
			g.Expect(value).NotTo(Equal(rewritten))
			g.Expect(holderOf(t, value).Instance).To(Equal(instance))
			g.Expect(p.GetNodeID()).To(Equal(uint32(1)))
		})
	}
}

// Without LocalDB the presence value has no instance: the four fields of
// agents before instances.
func TestWithoutLocalDBThePresenceHasNoInstance(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	p := newPlugin(t, "node-x", newDB(t, srv), &loop{}, withTTL(time.Second))
	g.Expect(resync(p, nil)).To(Succeed())
	value, _, _ := rawPresence(t, srv.Client(t))
	var fields map[string]any
	g.Expect(json.Unmarshal([]byte(value), &fields)).To(Succeed())
	g.Expect(fields).To(HaveLen(4))
	g.Expect(fields).To(HaveKey("node"))
	g.Expect(fields).To(HaveKey("host"))
	g.Expect(fields).To(HaveKey("pid"))
	g.Expect(fields).To(HaveKey("started"))
}

// A stored instance that is not one (damaged, or written by hand) is
// replaced by a new one before the first claim.
func TestInvalidStoredInstanceIsReplaced(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	local, err := openBolt(t, path, 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(local.Put(t.Context(), nodesync.InstanceKey, []byte("short"))).To(Succeed())
	p := newPlugin(t, "node-x", newDB(t, srv), &loop{}, withLocalDB(local), withTTL(time.Second))
	g.Expect(resync(p, nil)).To(Succeed())
	instance := storedInstance(t, local)
	g.Expect(instance).To(MatchRegexp(`^[A-Z2-7]{26}$`))
	value, _, _ := rawPresence(t, srv.Client(t))
	g.Expect(holderOf(t, value).Instance).To(Equal(instance))
}
