package etcd

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
)

// identityStep is one step of an identity script: take a mark (mark set),
// or observe the answer to the request sent at an earlier mark.
type identityStep struct {
	mark    string // take a mark under this name
	answer  string // observe an answer to the request marked so
	cluster uint64
	rev     int64
	watch   bool   // a watch answer: the revision is not checked
	want    string // the reason of the replacement found; "" none
}

func TestIdentityFindsAReplacedStore(t *testing.T) {
	cases := []struct {
		name  string
		steps []identityStep
	}{
		{"revisions rise on one cluster", []identityStep{
			{mark: "1"}, {answer: "1", cluster: 7, rev: 10},
			{mark: "2"}, {answer: "2", cluster: 7, rev: 12},
			{mark: "3"}, {answer: "3", cluster: 7, rev: 12},
		}},
		{"revision back after a later request", []identityStep{
			{mark: "1"}, {answer: "1", cluster: 7, rev: 50},
			{mark: "2"}, {answer: "2", cluster: 7, rev: 3, want: kvdb.ReasonRevisionBack},
			{mark: "3"}, {answer: "3", cluster: 7, rev: 4},
		}},
		{"concurrent requests answered out of order", []identityStep{
			{mark: "1"}, {answer: "1", cluster: 7, rev: 10},
			{mark: "a"}, {mark: "b"},
			{answer: "b", cluster: 7, rev: 20},
			{answer: "a", cluster: 7, rev: 15}, // served before b, read after it
		}},
		{"another cluster ID", []identityStep{
			{mark: "1"}, {answer: "1", cluster: 7, rev: 10},
			{mark: "2"}, {answer: "2", cluster: 8, rev: 11, want: kvdb.ReasonStoreID},
			{mark: "3"}, {answer: "3", cluster: 8, rev: 12},
		}},
		{"an answer sent before the replacement proves nothing", []identityStep{
			{mark: "1"}, {answer: "1", cluster: 7, rev: 50},
			{mark: "old"}, {mark: "2"},
			{answer: "2", cluster: 7, rev: 2, want: kvdb.ReasonRevisionBack},
			{answer: "old", cluster: 7, rev: 51},
			{mark: "3"}, {answer: "3", cluster: 7, rev: 3},
		}},
		{"watch answers: the cluster ID only", []identityStep{
			{mark: "1"}, {answer: "1", cluster: 7, rev: 50},
			{mark: "w"}, {answer: "w", cluster: 7, rev: 40, watch: true},
			{answer: "w", cluster: 9, rev: 60, watch: true, want: kvdb.ReasonStoreID},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			var id identity
			marks := map[string]mark{}
			for i, s := range c.steps {
				if s.mark != "" {
					marks[s.mark] = id.mark()
					continue
				}
				r, found := id.observe(marks[s.answer], &etcdserverpb.ResponseHeader{ClusterId: s.cluster, Revision: s.rev}, !s.watch)
				g.Expect(found).To(Equal(s.want != ""), "step %d: %+v", i, s)
				g.Expect(r.Reason).To(Equal(s.want), "step %d", i)
				if found {
					g.Expect(r.Revision).To(Equal(s.rev))
					g.Expect(r.NewID).To(Equal(clusterHex(s.cluster)))
				}
			}
		})
	}
}

func TestIdentityEndsTheOldStoresWatches(t *testing.T) {
	g := NewWithT(t)
	var id identity
	old, cancelOld := context.WithCancelCause(t.Context())
	defer cancelOld(nil)
	first := id.mark()
	id.observe(first, &etcdserverpb.ResponseHeader{ClusterId: 7, Revision: 30}, true)
	id.addWatch(cancelOld)
	m := id.mark()

	r, found := id.observe(m, &etcdserverpb.ResponseHeader{ClusterId: 7, Revision: 1}, true)
	g.Expect(found).To(BeTrue())
	g.Expect(r).To(Equal(kvdb.StoreReplaced{Reason: kvdb.ReasonRevisionBack, OldID: "7", NewID: "7",
		LastRevision: 30, Revision: 1}))
	g.Expect(context.Cause(old)).To(MatchError(errReplaced), "the old store's watch ended")

	fresh, cancelFresh := context.WithCancelCause(t.Context())
	defer cancelFresh(nil)
	_, wm := id.addWatch(cancelFresh)
	g.Expect(wm.epoch).To(Equal(m.epoch+1), "a watch of the new store")
	_, found = id.observe(id.mark(), &etcdserverpb.ResponseHeader{ClusterId: 7, Revision: 2}, true)
	g.Expect(found).To(BeFalse())
	g.Expect(fresh.Err()).NotTo(HaveOccurred(), "a watch started after the replacement lives on")
}

// replacement is a way to put another store behind an endpoint.
type replacement struct {
	name   string
	start  func(t *testing.T) (endpoint string, replace func())
	reason string
}

func replacements() []replacement {
	return []replacement{
		{"etcd process emptied", func(t *testing.T) (string, func()) {
			p := etcdtest.StartProcess(t)
			return p.Endpoint(), p.Replace
		}, kvdb.ReasonRevisionBack},
		{"another etcd cluster", func(t *testing.T) (string, func()) {
			p := etcdtest.StartProcess(t)
			return p.Endpoint(), p.ReplaceCluster
		}, kvdb.ReasonStoreID},
	}
}

// A store replaced behind the endpoint (same port, empty data) ends the
// watches of the old one and is reported, with no reconnect resync to
// cover for it; a List and Watch of the new store then see its changes.
// The watch had been resumed by etcd's client from the old revision: it
// would wait, silent, for the new store to reach it.
func TestAReplacedStoreEndsTheWatchesAndIsReported(t *testing.T) {
	for _, rc := range replacements() {
		t.Run(rc.name, func(t *testing.T) {
			g := NewWithT(t)
			endpoint, replace := rc.start(t)
			cfg := fastConfig(endpoint)
			cfg.ResyncAfterReconnect = false
			p := startPlugin(t, cfg, nil)
			found := make(chan kvdb.StoreReplaced, 4)
			p.OnStoreReplaced(func(r kvdb.StoreReplaced) { found <- r })
			for i := range 20 {
				g.Expect(p.Put(t.Context(), "w/old", []byte{byte(i)})).To(Succeed())
			}
			_, rev, err := p.List(t.Context(), "w/")
			g.Expect(err).NotTo(HaveOccurred())
			ch, err := p.Watch(t.Context(), "w/", rev+1)
			g.Expect(err).NotTo(HaveOccurred())

			replace()
			replaced := time.Now()
			g.Eventually(ch).WithTimeout(10 * time.Second).Should(BeClosed())
			var r kvdb.StoreReplaced
			g.Eventually(found).WithTimeout(10 * time.Second).Should(Receive(&r))
			t.Logf("found %q %s after the new store was up", r.Reason, time.Since(replaced).Round(time.Millisecond))
			g.Expect(r.Reason).To(Equal(rc.reason))
			g.Expect(r.LastRevision).To(BeNumerically(">=", rev))
			g.Expect(r.Revision).To(BeNumerically("<", r.LastRevision))
			g.Consistently(found).WithTimeout(300*time.Millisecond).ShouldNot(Receive(), "found once")

			kvs, newRev, err := p.List(t.Context(), "w/")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kvs).To(BeEmpty())
			ch, err = p.Watch(t.Context(), "w/", newRev+1)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Put(t.Context(), "w/new", []byte("x"))).To(Succeed())
			ev := expectNext(g, ch)
			g.Expect(ev.Key).To(Equal("w/new"))
			g.Expect(ev.Revision).To(Equal(newRev + 1))
		})
	}
}

// expectNext receives one event within 10s.
func expectNext(g Gomega, ch <-chan kvdb.WatchEvent) kvdb.WatchEvent {
	var ev kvdb.WatchEvent
	g.Eventually(ch).WithTimeout(10 * time.Second).Should(Receive(&ev))
	return ev
}
