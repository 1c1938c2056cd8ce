package ipam_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd"
	"github.com/contiv-ipam/agent/infra/kvdb/etcd/etcdtest"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	"github.com/contiv-ipam/agent/plugins/ksr/model/agentstatus"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// statusEtcd returns an etcd plugin on an embedded test server.
func statusEtcd(t *testing.T) kvdb.Broker {
	t.Helper()
	srv := etcdtest.Start(t)
	c := etcd.DefaultConfig()
	c.Endpoints = []string{srv.Endpoint()}
	c.DialTimeout, c.OperationTimeout = 3*time.Second, 2*time.Second
	db := etcd.NewPlugin(etcd.UseConf(c), etcd.UseEnv(noEnv),
		etcd.UseDeps(func(d *etcd.Deps) { d.Cfg, d.Log = config.NoFile, slog.New(slog.DiscardHandler) }))
	if err := db.Init(); err != nil {
		t.Fatalf("etcd plugin Init: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// fakeAdvertiser advertises http://<node IP>:9999 and remembers the
// node IP it was given.
type fakeAdvertiser struct{ got atomic.Pointer[netip.Addr] }

func (a *fakeAdvertiser) AdvertiseURL(nodeIP netip.Addr) string {
	a.got.Store(&nodeIP)
	if !nodeIP.IsValid() {
		return ""
	}
	return "http://" + net.JoinHostPort(nodeIP.String(), "9999")
}

// statusFixture is IPAM with a status publisher writing to db.
type statusFixture struct {
	ipam *ipam.Plugin
	sync *fakeNodeSync
	adv  *fakeAdvertiser
	db   kvdb.Broker
}

func newStatusFixture(t *testing.T, yaml string, db kvdb.Broker, period time.Duration) *statusFixture {
	t.Helper()
	g := NewWithT(t)
	conf, err := newContivConf(t, yaml)
	g.Expect(err).NotTo(HaveOccurred())
	f := &statusFixture{sync: &fakeNodeSync{}, adv: &fakeAdvertiser{}, db: db}
	f.sync.id.Store(3)
	f.sync.setNodes(nodesync.Nodes{thisNode: {ID: 3, Name: thisNode, MgmtIPAddresses: []net.IP{net.ParseIP("10.0.0.3")}}})
	c := ipam.DefaultConfig()
	c.StatusPublishPeriod = period
	f.ipam = ipam.NewPlugin(ipam.UseConf(c), ipam.UseDeps(func(d *ipam.Deps) {
		d.Log, d.ContivConf, d.NodeSync, d.ServiceLabel = quietLog(), conf, f.sync, fakeLabel{thisNode}
		d.StatusDB, d.REST = db, f.adv
	}))
	g.Expect(f.ipam.Init()).To(Succeed())
	g.Expect(f.ipam.AfterInit()).To(Succeed())
	t.Cleanup(func() { _ = f.ipam.Close() })
	return f
}

func (f *statusFixture) resync(t *testing.T, ks api.KubeStateData, rev int) {
	t.Helper()
	if ks == nil {
		ks = api.KubeStateData{}
	}
	if err := f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, rev, nil); err != nil {
		t.Fatal(err)
	}
}

// record reads this node's record; nil when there is none.
func record(g Gomega, db kvdb.Broker) *agentstatus.Status {
	kv, found, err := db.Get(context.Background(), agentstatus.Key(thisNode))
	g.Expect(err).NotTo(HaveOccurred())
	if !found {
		return nil
	}
	st, err := agentstatus.Decode(kv.Value)
	g.Expect(err).NotTo(HaveOccurred())
	return st
}

// After the first resync the record appears with the node, its ID, the
// REST URL (from the node's IP), readiness and the pool; an allocation
// shows in it within a period; Close deletes it.
func TestStatusRecordIsPublishedUpdatedAndDeleted(t *testing.T) {
	g := NewWithT(t)
	db := statusEtcd(t)
	f := newStatusFixture(t, defaultTestConfig, db, 300*time.Millisecond)
	g.Consistently(func(g Gomega) *agentstatus.Status { return record(g, db) }, 1200*time.Millisecond, 100*time.Millisecond).
		Should(BeNil(), "nothing before the first resync")

	start := time.Now()
	f.resync(t, nil, 1)
	var st *agentstatus.Status
	g.Eventually(func(g Gomega) *agentstatus.Status { st = record(g, db); return st }, 5*time.Second, 50*time.Millisecond).
		ShouldNot(BeNil())
	g.Expect(st.Version).To(Equal(1))
	g.Expect(st.Node).To(Equal(thisNode))
	g.Expect(st.NodeID).To(Equal(uint32(3)))
	g.Expect(st.REST).To(Equal("http://10.0.0.3:9999"))
	g.Expect(*f.adv.got.Load()).To(Equal(netip.MustParseAddr("10.0.0.3")), "the node's management IP")
	g.Expect(st.Ready).To(BeTrue())
	// Node 3 of 1.2.128.0/17 cut to /29: 1.2.128.24/29, 4 addresses for
	// pods (network, gateway, NAT loopback and broadcast aside).
	g.Expect(st.Pools).To(Equal([]agentstatus.Pool{{Name: "1.2.128.24/29", Family: 4, Prefix: "1.2.128.24/29", Used: 0, Total: 4}}))
	g.Expect(st.Pods).To(BeZero())
	g.Expect(st.PeriodSeconds).To(Equal(1), "a period under a second is published as 1 s")
	g.Expect(st.Updated).To(BeTemporally(">=", start.Add(-time.Second)))
	g.Expect(st.Stale(time.Now())).To(BeFalse())

	_, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.ipam.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		st := record(g, db)
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Pools).To(HaveLen(1))
		g.Expect(st.Pools[0].Used).To(Equal(uint64(2)))
		g.Expect(st.Pods).To(Equal(2))
	}, 5*time.Second, 50*time.Millisecond).Should(Succeed())

	// Unchanged, the record is still written again within two periods
	// (readers see it fresh).
	first := record(g, db).Updated
	g.Eventually(func(g Gomega) time.Time { return record(g, db).Updated }, 5*time.Second, 50*time.Millisecond).
		Should(BeTemporally(">", first))

	g.Expect(f.ipam.Close()).To(Succeed())
	g.Expect(record(g, db)).To(BeNil(), "Close deletes the record")
}

// A readiness change is written within about a second, even with a long
// period: with an external IPAM and no pod CIDR the agent waits
// (unready, record written with ready false); the node's pod CIDR makes it
// ready.
func TestStatusRecordFollowsReadinessWithinASecond(t *testing.T) {
	g := NewWithT(t)
	db := statusEtcd(t)
	f := newStatusFixture(t, externalConfig, db, time.Hour)
	f.resync(t, nil, 1)
	g.Eventually(func(g Gomega) *agentstatus.Status { return record(g, db) }, 5*time.Second, 50*time.Millisecond).
		Should(HaveField("Ready", BeFalse()))
	g.Expect(record(g, db).PeriodSeconds).To(Equal(3600))

	f.resync(t, nodeWithCIDR("1.2.200.0/24"), 2)
	changed := time.Now()
	g.Eventually(func(g Gomega) *agentstatus.Status { return record(g, db) }, 3*time.Second, 20*time.Millisecond).
		Should(HaveField("Ready", BeTrue()))
	g.Expect(time.Since(changed)).To(BeNumerically("<", 2*time.Second))
	st := record(g, db)
	// External IPAM: the /24's addresses less network and broadcast.
	g.Expect(st.Pools).To(Equal([]agentstatus.Pool{{Name: "1.2.200.0/24", Family: 4, Prefix: "1.2.200.0/24", Used: 0, Total: 254}}))
}

// statusPublishPeriod 0 writes nothing.
func TestStatusRecordOff(t *testing.T) {
	g := NewWithT(t)
	db := &countingDB{}
	f := newStatusFixture(t, defaultTestConfig, db, 0)
	f.resync(t, nil, 1)
	g.Consistently(db.writes, 1500*time.Millisecond, 100*time.Millisecond).Should(BeZero())
	g.Expect(f.ipam.Close()).To(Succeed())
	g.Expect(db.writes()).To(BeZero(), "nor deletes at Close")
}

// A status store that fails or hangs stops nothing: allocations are
// answered, the failed writes are tried again, and Close ends in bounded
// time.
func TestFailingStatusStoreDoesNotStopAllocations(t *testing.T) {
	for _, hang := range []bool{false, true} {
		name := map[bool]string{false: "failing", true: "hanging"}[hang]
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			db := &countingDB{fail: true, hang: hang}
			f := newStatusFixture(t, defaultTestConfig, db, 200*time.Millisecond)
			f.resync(t, nil, 1)
			g.Eventually(db.writes, 5*time.Second, 20*time.Millisecond).Should(BeNumerically(">=", 2), "tried again")
			for _, pod := range []podmodel.ID{pod1, pod2, pod3} {
				done := make(chan error, 1)
				go func() {
					_, err := f.ipam.AllocatePodIP(pod, "", "")
					done <- err
				}()
				g.Eventually(done, 2*time.Second).Should(Receive(BeNil()), "%s allocated", pod)
			}
			closed := time.Now()
			g.Expect(f.ipam.Close()).To(Succeed())
			g.Expect(time.Since(closed)).To(BeNumerically("<", 5*time.Second), "Close is bounded")
		})
	}
}

// countingDB is a status store that counts writes (Put and Delete) and,
// with fail, refuses them (after ctx ends, with hang).
type countingDB struct {
	kvdb.Broker // nil: other calls panic
	fail, hang  bool
	mu          sync.Mutex
	n           int
}

var errStatusDown = errors.New("status store down")

func (c *countingDB) write(ctx context.Context) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	if !c.fail {
		return nil
	}
	if c.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return errStatusDown
}

func (c *countingDB) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *countingDB) Put(ctx context.Context, _ string, _ []byte) error { return c.write(ctx) }
func (c *countingDB) Delete(ctx context.Context, _ string) (bool, error) {
	return false, c.write(ctx)
}
