package nodesync_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

func TestClaimOnAnEmptyStoreTakesIDOne(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(p.GetNodeID()).To(BeZero(), "no ID before the first resync")
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(1)))
	attempts, conflicts, _ := p.ClaimStats()
	g.Expect(attempts).To(Equal(1))
	g.Expect(conflicts).To(BeZero())
	g.Expect(records(t, db)).To(HaveKeyWithValue(uint32(1), HaveField("Name", "node-x")))
	g.Expect(records(t, db)[1].GetId()).To(Equal(uint32(1)))
}

func TestClaimTakesTheSmallestFreeID(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	for _, id := range []uint32{1, 2, 4} {
		putRecord(t, db, &vppnode.VppNode{Id: id, Name: fmt.Sprintf("other-%d", id)})
	}
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(3)))
	recs := records(t, db)
	g.Expect(recs).To(HaveLen(4))
	g.Expect(recs[3].GetName()).To(Equal("node-x"))
	g.Expect(recs[3].GetId()).To(Equal(uint32(3)))
	g.Expect(recs[4].GetName()).To(Equal("other-4"), "other records untouched")
}

func TestClaimAboveTheHighestIDWithoutGaps(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	for id := uint32(1); id <= 12; id++ { // keys sort as strings: 1, 10, 11, 12, 2, ...
		putRecord(t, db, &vppnode.VppNode{Id: id, Name: "other"})
	}
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(13)))
}

func TestClaimFindsThisNodesRecord(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a"})
	putRecord(t, db, &vppnode.VppNode{Id: 7, Name: "node-x", IpAddresses: []string{"192.168.16.7/24"}})
	p := newPlugin(t, "node-x", db, &loop{})
	// The kube state does not know the record yet (stale): etcd decides.
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(7)))
	attempts, _, _ := p.ClaimStats()
	g.Expect(attempts).To(BeZero(), "no transaction")
	g.Expect(records(t, db)).To(HaveLen(2))
	me := p.GetAllNodes()["node-x"]
	g.Expect(me).NotTo(BeNil())
	g.Expect(me.VppIPAddresses).To(HaveLen(1))
	g.Expect(me.VppIPAddresses[0].String()).To(Equal("192.168.16.7/24"))
}

func TestClaimKeepsTheSmallestOfSeveralOwnRecords(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	putRecord(t, db, &vppnode.VppNode{Id: 5, Name: "node-x"})
	putRecord(t, db, &vppnode.VppNode{Id: 3, Name: "node-x"})
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a"})
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(3)))
	g.Expect(records(t, db)).To(HaveLen(3), "the agent deletes no ID")
}

func TestClaimSkipsInvalidKeysAndKeepsUndecodableIDsTaken(t *testing.T) {
	g := NewWithT(t)
	db := newDB(t, etcdtest.Start(t))
	mine := marshal(t, &vppnode.VppNode{Id: 1, Name: "node-x"})
	putRaw(t, db, vppnode.KeyPrefix+"0", mine) // not a node ID: not this node's record
	putRaw(t, db, vppnode.KeyPrefix+"01", mine)
	putRaw(t, db, vppnode.KeyPrefix+"abc", mine)
	putRaw(t, db, vppnode.KeyPrefix+"1/x", mine)
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a"})
	putRaw(t, db, vppnode.Key(2), []byte("{not json"))
	p := newPlugin(t, "node-x", db, &loop{})
	g.Expect(resync(p, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(3)))
}

func TestClaimGivesUpAfterTheAttemptBound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []nodesync.Option
		attempts int
		last     uint32
	}{
		// Every listing is empty and the pick is the smallest candidate:
		// 1..8 (each lost ID is known taken), list again after the eighth
		// loss, 1..8, ...: the hundredth is 4.
		{name: "default bound", attempts: nodesync.DefaultMaxClaimAttempts, last: 4},
		{name: "option", opts: []nodesync.Option{nodesync.UseMaxClaimAttempts(7)}, attempts: 7, last: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			db := &fakeStore{} // every compare fails
			opts := append([]nodesync.Option{nodesync.UsePick(smallest)}, tc.opts...)
			p := newPlugin(t, "node-x", db, &loop{}, opts...)
			err := resync(p, nil)
			g.Expect(err).To(HaveOccurred())
			g.Expect(api.IsFatal(err)).To(BeTrue(), "wrapped as FatalError")
			g.Expect(errors.Is(err, nodesync.ErrClaimGaveUp)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring(
				`unable to allocate node ID for node "node-x": gave up after %d attempts, last candidate ID %d was taken`, tc.attempts, tc.last))
			g.Expect(db.txns).To(Equal(tc.attempts))
			g.Expect(p.GetNodeID()).To(BeZero())
			g.Expect(p.GetAllNodes()).To(BeEmpty())
		})
	}
}

func TestClaimWithoutDatabase(t *testing.T) {
	g := NewWithT(t)
	p := newPlugin(t, "node-x", nil, &loop{})
	err := resync(p, nil)
	g.Expect(api.IsFatal(err)).To(BeTrue())
	g.Expect(errors.Is(err, nodesync.ErrNoDatabase)).To(BeTrue())
	g.Expect(err.Error()).To(Equal(`fatal error: unable to allocate node ID for node "node-x": database is not provided`))
}

// An etcd that does not answer never stops the agent: the claim fails,
// the node has no ID (IPAM waits), and a ClaimRetry is pushed after a
// short delay.
func TestClaimErrorsOfEtcdAreRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		db   *fakeStore
		want string
	}{
		{name: "list fails", db: &fakeStore{listErr: errBoom},
			want: `unable to allocate node ID for node "node-x": cannot list node IDs in the database: boom`},
		{name: "txn fails", db: &fakeStore{txnErr: errBoom},
			want: `unable to allocate node ID for node "node-x": creating "allocatedIDs/1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			l := &loop{}
			p := newPlugin(t, "node-x", tc.db, l)
			g.Expect(resync(p, nil)).To(Succeed(), "not fatal")
			g.Expect(p.GetNodeID()).To(BeZero())
			g.Eventually(l.retries).WithTimeout(5*time.Second).Should(BeNumerically(">=", 1), "a retry is pushed")
		})
	}
}

func TestClaimWithEtcdDownWaitsThenTheNextResyncClaims(t *testing.T) {
	g := NewWithT(t)
	srv := etcdtest.Start(t)
	db := newDB(t, srv, shortTimeout)
	putRecord(t, db, &vppnode.VppNode{Id: 1, Name: "node-a"})
	l := &loop{}
	p := newPlugin(t, "node-x", db, l)
	srv.Stop()
	g.Expect(resync(p, nil)).To(Succeed(), "etcd down is not fatal")
	g.Expect(p.GetNodeID()).To(BeZero())
	g.Eventually(l.retries).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 1))

	srv.Restart()
	g.Eventually(func() uint32 { _ = resync(p, nil); return p.GetNodeID() }, 10*time.Second, 100*time.Millisecond).Should(Equal(uint32(2)))
}

// A restarted agent whose etcd is down starts from the bolt mirror: its
// record there gives its ID back; without a record it cannot claim one.
func TestLocalResyncTakesTheIDFromTheMirror(t *testing.T) {
	g := NewWithT(t)
	down := &fakeStore{listErr: errBoom, txnErr: errBoom}
	ks := api.KubeStateData{"vppnode": {
		vppnode.Key(7): &vppnode.VppNode{Id: 7, Name: "node-x"},
		vppnode.Key(2): &vppnode.VppNode{Id: 2, Name: "other"},
	}}
	p := newPlugin(t, "node-x", down, &loop{})
	g.Expect(p.Resync(&api.DBResync{Local: true, KubeState: ks}, ks, 1, nil)).To(Succeed())
	g.Expect(p.GetNodeID()).To(Equal(uint32(7)))
	g.Expect(p.GetAllNodes()).To(HaveKey("other"))

	remote := newPlugin(t, "node-x", down, &loop{})
	g.Expect(remote.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)).To(Succeed(), "etcd down: waits, not fatal")
	g.Expect(remote.GetNodeID()).To(BeZero(), "a remote resync claims in etcd, which is down")

	fresh := newPlugin(t, "node-new", down, &loop{})
	g.Expect(fresh.Resync(&api.DBResync{Local: true, KubeState: ks}, ks, 1, nil)).To(Succeed())
	g.Expect(fresh.GetNodeID()).To(BeZero(), "no record in the mirror: an ID needs etcd")
}
