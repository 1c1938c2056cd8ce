package bolt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/kvdbtest"
)

func TestContract(t *testing.T) {
	kvdbtest.RunContract(t, func(t *testing.T) (kvdb.Broker, kvdb.Broker) {
		p := openPlugin(t, testConfig(t))
		// One process holds the file lock, so both "clients" are the same
		// plugin used from different goroutines.
		return p, p
	})
}

func TestPersistsAcrossReopen(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	cfg := testConfig(t)
	p := newPlugin(t, cfg)
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.Put(ctx, "a", []byte("1"))).To(Succeed())
	g.Expect(p.Put(ctx, "b", []byte("2"))).To(Succeed())
	_, err := p.Delete(ctx, "b")
	g.Expect(err).NotTo(HaveOccurred())
	_, rev, err := p.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Close()).To(Succeed())

	st, err := os.Stat(cfg.DBPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))

	p2 := openPlugin(t, cfg)
	kvs, rev2, err := p2.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev2).To(Equal(rev), "the revision is persisted")
	g.Expect(kvs).To(HaveLen(1))
	g.Expect(kvs[0].Key).To(Equal("a"))
	g.Expect(string(kvs[0].Value)).To(Equal("1"))

	g.Expect(p2.Put(ctx, "c", nil)).To(Succeed())
	kv, _, err := p2.Get(ctx, "c")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kv.Revision).To(Equal(rev+1), "revisions continue after reopen")

	_, err = p2.Watch(ctx, "", rev)
	g.Expect(err).To(MatchError(kvdb.ErrCompacted), "history from before the reopen is gone")
}

func TestNotBoltFile(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig(t)
	g.Expect(os.MkdirAll(filepath.Dir(cfg.DBPath), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(cfg.DBPath, []byte(strings.Repeat("not a database\n", 1000)), 0o600)).To(Succeed())
	p := newPlugin(t, cfg)
	err := p.Init()
	g.Expect(err).To(MatchError(ContainSubstring(cfg.DBPath)))
	g.Expect(err).To(MatchError(ContainSubstring("not a bolt database")))
	g.Expect(p.Close()).To(Succeed(), "Close after a failed Init")
}

func TestLockedFile(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig(t)
	openPlugin(t, cfg)
	second := newPlugin(t, cfg)
	err := second.Init()
	g.Expect(err).To(MatchError(ContainSubstring(cfg.DBPath)))
	g.Expect(err).To(MatchError(ContainSubstring("locked by another process")))
	g.Expect(err).To(MatchError(ContainSubstring("100ms")))
}

func TestClosed(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := newPlugin(t, testConfig(t))
	g.Expect(p.Put(ctx, "k", nil)).To(MatchError(kvdb.ErrClosed), "before Init")
	g.Expect(p.Init()).To(Succeed())
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
	_, err = p.Watch(ctx, "", 0)
	g.Expect(err).To(MatchError(kvdb.ErrClosed))
}

func TestSlowWatcherIsClosed(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	cfg := testConfig(t)
	cfg.WatchBuffer = 2
	p := openPlugin(t, cfg)
	slow, err := p.Watch(ctx, "", 0)
	g.Expect(err).NotTo(HaveOccurred())
	fast, err := p.Watch(ctx, "", 0)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range 5 {
		g.Expect(p.Put(ctx, "k", []byte{byte(i)})).To(Succeed(), "writes never wait for watchers")
		g.Eventually(fast).Should(Receive())
	}
	var got []kvdb.WatchEvent
	for ev := range slow {
		got = append(got, ev)
	}
	g.Expect(got).To(HaveLen(2), "the buffered events, then the channel closes")
}

func TestWatchHistoryIsBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	cfg := testConfig(t)
	cfg.WatchHistory = 4
	p := openPlugin(t, cfg)
	_, rev0, err := p.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	for i := range 20 {
		g.Expect(p.Put(ctx, "k", []byte{byte(i)})).To(Succeed())
	}
	_, err = p.Watch(ctx, "", rev0+1)
	g.Expect(err).To(MatchError(kvdb.ErrCompacted))
	g.Expect(err).To(MatchError(ContainSubstring("history starts at")))

	ch, err := p.Watch(ctx, "", rev0+17)
	g.Expect(err).NotTo(HaveOccurred(), "the newest watch-history events are kept")
	for i := 16; i < 20; i++ {
		var ev kvdb.WatchEvent
		g.Eventually(ch).Should(Receive(&ev))
		g.Expect(ev.Value).To(Equal([]byte{byte(i)}))
	}
}

func TestOnConnectRunsAtOnce(t *testing.T) {
	g := NewWithT(t)
	p := openPlugin(t, testConfig(t))
	ran := false
	p.OnConnect(func() error { ran = true; return nil })
	g.Expect(ran).To(BeTrue())
	g.Expect(p.NewBroker("x/").Put(context.Background(), "k", nil)).To(Succeed())
	_, found, err := p.Get(context.Background(), "x/k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
}

func TestOutcomeContract(t *testing.T) {
	kvdbtest.RunOutcomeContract(t, func(t *testing.T) kvdbtest.Outcomes {
		p := openPlugin(t, testConfig(t))
		st := newStaller(p.store)
		return kvdbtest.Outcomes{
			A: p, B: p, OrderedReads: true,
			StallTaken: st.arm,
			StallQueue: func() func() {
				release := st.arm()
				filler := make(chan error, 1)
				go func() { filler <- p.Put(context.Background(), "filler", nil) }()
				<-st.entered()
				return func() {
					release()
					if err := <-filler; err != nil {
						t.Errorf("filler write: %v", err)
					}
				}
			},
		}
	})
}

// staller holds the committer inside its next commit, once per arm.
type staller struct {
	mu      sync.Mutex
	gate    chan struct{} // closed by the release
	inside  chan struct{} // closed when the held commit has begun
	pending bool
}

func newStaller(s *store) *staller {
	st := &staller{}
	s.beforeCommit = func(int) {
		st.mu.Lock()
		gate, inside, pending := st.gate, st.inside, st.pending
		st.pending = false
		st.mu.Unlock()
		if pending {
			close(inside)
			<-gate
		}
	}
	return st
}

// arm holds the next commit until the returned release is called.
func (st *staller) arm() (release func()) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.gate, st.inside, st.pending = make(chan struct{}), make(chan struct{}), true
	gate := st.gate
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

// entered is closed once the armed commit has begun.
func (st *staller) entered() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.inside
}
