package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/infra/kvdb/bolt"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// These tests pin what a real bolt store does when its disk stalls: a
// commit that takes longer than IPAM's storeTimeout and then lands, and
// writes queued behind it. Each would give one address to two pods, or
// lose an acknowledged one, if IPAM acted on an outcome that is not the
// store's.

// commitStall holds bolt's committer inside its next commit once armed,
// as a stalled disk does: the writes of that commit are taken, those
// queued behind it wait.
type commitStall struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	gate    chan struct{}
}

func newCommitStall() *commitStall { return &commitStall{} }

func (s *commitStall) hook(int) {
	s.mu.Lock()
	armed, entered, gate := s.armed, s.entered, s.gate
	s.armed = false
	s.mu.Unlock()
	if armed {
		close(entered)
		<-gate
	}
}

// arm holds the next commit; the returned channel closes when it begins.
func (s *commitStall) arm() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.entered, s.gate = true, make(chan struct{}), make(chan struct{})
	return s.entered
}

// release lets the held commit go on; it may be called again.
func (s *commitStall) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate, s.armed = nil, false
	}
}

// openStalledBolt opens a bolt file whose commits stall can hold.
func openStalledBolt(t *testing.T, path string, stall *commitStall) *bolt.Plugin {
	t.Helper()
	b := openBoltWithHook(t, path, stall.hook)
	t.Cleanup(stall.release) // first: a failed test never leaves the committer held
	return b
}

// openBoltWithHook opens a bolt file whose committer calls hook before
// each commit.
func openBoltWithHook(t *testing.T, path string, hook func(requests int)) *bolt.Plugin {
	t.Helper()
	c := bolt.DefaultConfig()
	c.DBPath = path
	b := bolt.NewPlugin(bolt.UseConf(c), bolt.UseCommitHook(hook),
		bolt.UseDeps(func(d *bolt.Deps) { d.Cfg, d.Log = config.NoFile, quietLog() }))
	if err := b.Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// stallTimeout is IPAM's storeTimeout in these tests; the stalled commit
// is held for several of them.
const stallTimeout = 100 * time.Millisecond

func withStoreTimeout(c *ipam.Config) { c.StoreTimeout = stallTimeout }

// awaitEntered waits for the held commit to begin.
func awaitEntered(g Gomega, entered <-chan struct{}) {
	g.Eventually(entered).WithTimeout(10 * time.Second).Should(BeClosed())
}

// outlastTheTimeout lets IPAM's storeTimeout run out, several times over,
// while the commit is held: the fault under test is a write that takes
// longer than its caller's timeout.
func outlastTheTimeout() { time.Sleep(3 * stallTimeout) }

// checkStoreAndMemory asserts the invariants of the exactness tests: no
// address in two records, everything in bolt held in memory by the same
// allocation, every acknowledged address held and stored.
func checkStoreAndMemory(g Gomega, i *ipam.Plugin, db kvdb.Broker, acked map[podmodel.ID]string) {
	held := map[podmodel.ID]string{}
	for _, a := range ipam.AllocationsOf(i).Pods {
		held[podmodel.ID{Name: a.PodID.Name, Namespace: a.PodID.Namespace}] = a.MainIP
	}
	byIP := map[string]string{}
	kvs, _, err := db.List(context.Background(), ipam.AllocationPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	stored := map[podmodel.ID]string{}
	for _, kv := range kvs {
		ip := string(kv.Value)
		g.Expect(byIP).NotTo(HaveKey(ip), "%s stored for %s and %s", ip, byIP[ip], kv.Key)
		byIP[ip] = kv.Key
		var id podmodel.ID
		_, err := fmt.Sscanf(kv.Key[len(ipam.AllocationPrefix):], "default/%s", &id.Name)
		g.Expect(err).NotTo(HaveOccurred())
		id.Namespace = "default"
		stored[id] = ip
		g.Expect(held).To(HaveKeyWithValue(id, ip), "bolt holds %s for %s, memory does not", ip, id)
	}
	for id, ip := range acked {
		g.Expect(stored).To(HaveKeyWithValue(id, ip), "acknowledged %s of %s not in bolt", ip, id)
		g.Expect(held).To(HaveKeyWithValue(id, ip), "acknowledged %s of %s not held", ip, id)
	}
}

// A commit that outlasts storeTimeout and then lands: the address of the
// allocation in it is never handed to another pod meanwhile, and what
// the store holds afterwards is what memory holds.
func TestAStalledCommitNeverGivesItsAddressAway(t *testing.T) {
	g := NewWithT(t)
	stall := newCommitStall()
	db := openStalledBolt(t, filepath.Join(t.TempDir(), "bolt.db"), stall)
	f := mustFixture(t, fixtureOpts{db: db, conf: withStoreTimeout}, nil)

	entered := stall.arm()
	first := async(func() (net.IP, error) { return f.ipam.AllocatePodIP(pod1, "", "") })
	awaitEntered(g, entered)
	outlastTheTimeout()
	second := async(func() (net.IP, error) { return f.ipam.AllocatePodIP(pod2, "", "") })
	waitQueuedOrReturned(g, f.ipam, second)
	outlastTheTimeout()
	stall.release()
	first.wait(g)
	second.wait(g)

	settle(g, db)

	acked := map[podmodel.ID]string{}
	for id, c := range map[podmodel.ID]*call{pod1: first, pod2: second} {
		if c.err == nil {
			acked[id] = c.ip.String()
		}
	}
	// The rest of the /29 goes to other pods: none may get an address
	// whose record the store holds for pod1 or pod2.
	for n := range 4 {
		id := podmodel.ID{Name: fmt.Sprintf("p%d", n), Namespace: "default"}
		if ip, err := f.ipam.AllocatePodIP(id, "", ""); err == nil {
			acked[id] = ip.String()
		}
	}
	checkStoreAndMemory(g, f.ipam, db, acked)
}

// settle returns once every write queued in db so far has its outcome: a
// write queued after them has returned.
func settle(g Gomega, db kvdb.Broker) {
	g.Expect(db.Put(context.Background(), "/test/settled", nil)).To(Succeed())
}

// A pool removal whose write outlasts storeTimeout and lands later: no
// acknowledged allocation is lost at the next restart (a restart never
// drops a record because the stored pool list lacks its pool).
func TestALatePoolRemovalLosesNoAllocation(t *testing.T) {
	g := NewWithT(t)
	stall := newCommitStall()
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openStalledBolt(t, path, stall)
	f := mustFixture(t, fixtureOpts{db: db, conf: withStoreTimeout}, nil)
	pool := netip.MustParsePrefix("1.2.250.0/29")
	g.Expect(f.ipam.AddPool(pool)).To(Succeed())

	entered := stall.arm()
	removed := make(chan error, 1)
	go func() { _, err := f.ipam.RemovePool(pool, false); removed <- err }()
	awaitEntered(g, entered)
	outlastTheTimeout()
	stall.release()
	var rmErr error
	g.Eventually(removed).WithTimeout(10 * time.Second).Should(Receive(&rmErr))
	t.Logf("RemovePool: %v", rmErr)

	// The node's own /29 has 4 addresses: the 5th and 6th pods get the
	// pool's, if IPAM still has it.
	acked := map[podmodel.ID]string{}
	for n := range 6 {
		id := podmodel.ID{Name: fmt.Sprintf("p%d", n), Namespace: "default"}
		if ip, err := f.ipam.AllocatePodIP(id, "", ""); err == nil {
			acked[id] = ip.String()
		}
	}
	g.Expect(acked).NotTo(BeEmpty())
	settle(g, db)
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openStalledBolt(t, path, newCommitStall())
	f = mustFixture(t, fixtureOpts{db: db, conf: withStoreTimeout}, nil)
	checkStoreAndMemory(g, f.ipam, db, acked)
}

// Thousands of requests for one pod behind a stalled commit: IPAM holds a
// bounded number of them and answers the rest at once with "try again
// later" (ErrTryAgain, CNI code 11), not after the disk recovers.
func TestRequestsBehindAStalledCommitAreBounded(t *testing.T) {
	const callers = 3000
	g := NewWithT(t)
	stall := newCommitStall()
	db := openStalledBolt(t, filepath.Join(t.TempDir(), "bolt.db"), stall)
	f := mustFixture(t, fixtureOpts{db: db, conf: withStoreTimeout}, nil)

	entered := stall.arm()
	first := async(func() (net.IP, error) { return f.ipam.AllocatePodIP(pod1, "", "") })
	awaitEntered(g, entered)
	var tryAgain atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			if _, err := f.ipam.AllocatePodIP(pod1, "", ""); errors.Is(err, podmanager.ErrTryAgain) {
				tryAgain.Add(1)
			}
		})
	}
	g.Eventually(tryAgain.Load).WithTimeout(10*time.Second).Should(BeNumerically(">=", callers-ipam.MaxHeldRequests),
		"callers beyond the bound are told to try again while the commit is stalled")
	g.Expect(ipam.QueuedRequests(f.ipam)).To(BeNumerically("<=", ipam.MaxHeldRequests))
	stall.release()
	wg.Wait()
	first.wait(g)
	g.Expect(first.err).NotTo(HaveOccurred())
}

// A CNI ADD whose caller gave up while it waited is never decided: here
// it reaches IPAM after the runtime's DEL (its push was late), the DEL
// releases nothing, and the ADD must not allocate an address nobody
// would free.
func TestAnADDWhoseCallerGaveUpIsNeverDecidedAfterItsDEL(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	gt := newGate(podKey(pod2))
	fdb.setDecide(gt.decide)
	reg := prometheus.NewRegistry()
	f := mustFixture(t, fixtureOpts{db: fdb, metrics: reg}, nil)
	t.Cleanup(func() {
		select {
		case gt.open <- pass:
		default:
		}
	})
	// pod2's write is held, and a resync waits for it: the keeper takes
	// nothing new meanwhile.
	held := async(func() (net.IP, error) { return f.ipam.AllocatePodIP(pod2, "", "") })
	g.Eventually(gt.entered).WithTimeout(10 * time.Second).Should(Receive())
	resync := async(func() (net.IP, error) {
		return nil, f.ipam.Resync(&api.HealingResync{Type: api.AfterError}, api.KubeStateData{}, 2, nil)
	})
	g.Eventually(func() int { return ipam.QueuedRequests(f.ipam) }).WithTimeout(10 * time.Second).Should(Equal(1))

	key := att("c1", "eth0")
	del := podmanager.NewDeletePod()
	del.Pod, del.Key = pod1, key
	deleted := make(chan error, 1)
	go func() {
		if _, err := f.ipam.Update(del, nil); err != nil {
			deleted <- err
			return
		}
		deleted <- del.Wait(context.Background())
	}()
	g.Eventually(func() int { return ipam.QueuedRequests(f.ipam) }).WithTimeout(10 * time.Second).Should(Equal(2))

	addCtx, giveUp := context.WithCancel(context.Background())
	add := podmanager.NewAddPod()
	add.Pod, add.Key, add.NetworkNamespace, add.Ctx = pod1, key, "/var/run/netns/c1", addCtx
	added := make(chan error, 1)
	go func() { _, err := f.ipam.Update(add, nil); added <- err }()
	g.Eventually(func() int { return ipam.QueuedRequests(f.ipam) }).WithTimeout(10*time.Second).Should(Equal(3),
		"the late ADD is queued behind the DEL")
	giveUp()
	var addErr error
	g.Eventually(added).WithTimeout(10 * time.Second).Should(Receive(&addErr))
	g.Expect(addErr).To(MatchError(context.Canceled), "the caller is answered as soon as it gives up")

	gt.open <- pass
	g.Expect(held.wait(g).err).NotTo(HaveOccurred())
	g.Expect(resync.wait(g).err).NotTo(HaveOccurred())
	g.Eventually(deleted).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	g.Expect(f.ipam.GetPodIP(pod1)).To(BeNil(), "the late ADD allocated nothing")
	g.Expect(testutil.ToFloat64(failures(t, reg))).To(BeZero(),
		"it was dropped undecided, not decided and then undone when its write was withdrawn")
	settle(g, db)
	kvs, _, err := db.List(context.Background(), ipam.AttachmentPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(BeEmpty(), "and stored nothing")
}

// A resync whose store reads outlast storeTimeout (a read waiting for a
// long commit on a slow disk) is an error the controller heals, not a
// fatal one that restarts the agent; a failed store stays fatal. (An
// agent under a loaded disk with storeTimeout 200ms died at start.)
func TestASlowStoreAtResyncIsNotFatal(t *testing.T) {
	g := NewWithT(t)
	fdb, _ := boltFaults(t)
	f, err := build(t, fixtureOpts{db: fdb})
	g.Expect(err).NotTo(HaveOccurred())
	ks := api.KubeStateData{}

	fdb.setListErr(fmt.Errorf("bolt list: waiting for the commit of a write of unknown outcome: %w", context.DeadlineExceeded))
	err = f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(api.IsFatal(err)).To(BeFalse(), "a slow store: the healing resync tries again")

	fdb.setListErr(fmt.Errorf("bolt list: %w: %w", kvdb.ErrStoreFailed, context.DeadlineExceeded))
	err = f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 1, nil)
	g.Expect(api.IsFatal(err)).To(BeTrue(), "a failed store must be reopened: fatal")

	fdb.setListErr(nil)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	g.Expect(f.ipam.PodSubnetThisNode()).NotTo(BeNil())
}
