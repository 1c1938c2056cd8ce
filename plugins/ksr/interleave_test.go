package ksr

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// errUnknown is the error of a write whose outcome the writer cannot know
// (a timeout after the request left).
var errUnknown = errors.New("faultDB: request timed out, outcome unknown")

// faultDB wraps the etcd plugin: a hook runs before each Txn, and the next
// Txns can be made to fail after (applied) or instead of (lost) reaching
// etcd.
type faultDB struct {
	*etcd.Plugin
	mu         sync.Mutex
	beforeTxn  func(ops []kvdb.Op)
	appliedErr int // the next Txns are applied, then report errUnknown
	lostErr    int // the next Txns are dropped and report errUnknown
}

func (f *faultDB) Txn(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	f.mu.Lock()
	hook := f.beforeTxn
	applied, lost := f.appliedErr > 0, f.appliedErr == 0 && f.lostErr > 0
	if applied {
		f.appliedErr--
	} else if lost {
		f.lostErr--
	}
	f.mu.Unlock()
	if hook != nil {
		hook(ops)
	}
	if lost {
		return false, errUnknown
	}
	ok, err := f.Plugin.Txn(ctx, cmps, ops)
	if applied && err == nil {
		return false, errUnknown
	}
	return ok, err
}

func (f *faultDB) set(fn func(f *faultDB)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// startFaulty starts a replica whose DB is a faultDB over a fresh etcd.
func startFaulty(t *testing.T, client *fake.Clientset, opts ...Option) (*Plugin, *faultDB, *etcdtest.Server) {
	srv := etcdtest.Start(t)
	db := newDB(t, srv)
	f := &faultDB{Plugin: db}
	opts = append(opts, UseDeps(func(d *Deps) { d.DB = f }))
	return startKSR(t, db, client, "a", testConfig(), opts...), f, srv
}

// putsOf counts the puts of key among ops.
func putsOf(ops []kvdb.Op, key string) int {
	n := 0
	for _, op := range ops {
		if op.Kind == kvdb.OpPut && op.Key == key {
			n++
		}
	}
	return n
}

// An object that changes while a resync's write is in flight (after the
// resync read the stores) is written right after the resync, exactly once.
func TestAChangeDuringAResyncWriteIsWrittenAfterIt(t *testing.T) {
	g := NewWithT(t)
	client := fake.NewClientset(testPod("default", "p1", "10.1.1.2"))
	p, f, srv := startFaulty(t, client)
	leading(t, p)
	late := "/vnf-agent/contiv-ksr/" + pod.Key("late", "default")
	var mu sync.Mutex
	lateWrites := 0
	once := sync.Once{}
	f.set(func(f *faultDB) {
		f.beforeTxn = func(ops []kvdb.Op) {
			mu.Lock()
			lateWrites += putsOf(ops, late)
			mu.Unlock()
			if putsOf(ops, "/vnf-agent/contiv-ksr/"+pod.Key("p1", "default")) == 0 {
				return
			}
			once.Do(func() { // inside the resync's write of p1
				_, err := client.CoreV1().Pods("default").Create(context.Background(), testPod("default", "late", "10.1.1.3"), metav1.CreateOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Eventually(p.dirty.len).WithTimeout(5*time.Second).Should(Equal(1), "the informer saw it")
			})
		}
	})
	_, err := srv.Client(t).Delete(t.Context(), "/vnf-agent/contiv-ksr/"+pod.Key("p1", "default"))
	g.Expect(err).NotTo(HaveOccurred())
	p.resyncNow <- struct{}{} // the resync rewrites p1; "late" appears during that write
	g.Eventually(func() int64 { return modRev(t, srv.Client(t), pod.Key("late", "default")) }).WithTimeout(5 * time.Second).ShouldNot(BeZero())
	g.Consistently(func() int {
		mu.Lock()
		defer mu.Unlock()
		return lateWrites
	}).WithTimeout(300 * time.Millisecond).Should(Equal(1))
}

// A write whose outcome is unknown (applied or not) drops the mirror's
// view: after a pause a resync makes etcd right, and health says Error
// meanwhile, then OK.
func TestAWriteOfUnknownOutcomeIsFollowedByAResync(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   func(f *faultDB)
		wantFix Fixes
	}{
		{name: "applied", fault: func(f *faultDB) { f.appliedErr = 1 }, wantFix: Fixes{}},
		{name: "lost", fault: func(f *faultDB) { f.lostErr = 1 }, wantFix: Fixes{pod.Keyword: {fixAdded: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			client := fake.NewClientset()
			rep := &stateLog{}
			p, f, srv := startFaulty(t, client, UseDeps(func(d *Deps) { d.StatusCheck = rep }))
			leading(t, p)
			f.set(tc.fault)
			_, err := client.CoreV1().Pods("default").Create(t.Context(), testPod("default", "p1", "10.1.1.2"), metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func() float64 { return testutil.ToFloat64(p.metrics.resyncs.WithLabelValues("ok")) }).
				WithTimeout(5 * time.Second).Should(BeEquivalentTo(2))
			g.Expect(p.status.get().LastResync.Fixes).To(Equal(tc.wantFix))
			g.Expect(modRev(t, srv.Client(t), pod.Key("p1", "default"))).NotTo(BeZero())
			g.Expect(rep.states()).To(ContainElement(health.Error))
			g.Eventually(rep.last).Should(Equal(health.OK), "OK again after the resync")
		})
	}
}

// stateLog is a health.Reporter that keeps every state reported.
type stateLog struct {
	mu sync.Mutex
	s  []health.State
}

var _ health.Reporter = (*stateLog)(nil)

func (l *stateLog) Register(string, health.Probe) {}

func (l *stateLog) ReportStateChange(_ string, s health.State, _ error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s = append(l.s, s)
}

func (l *stateLog) states() []health.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]health.State(nil), l.s...)
}

func (l *stateLog) last() health.State {
	s := l.states()
	if len(s) == 0 {
		return health.Init
	}
	return s[len(s)-1]
}
