package ipam_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Each test here pins one interleaving of API calls with a bolt write in
// flight (a faultDB gate holds the write) and checks that IPAM's single
// writer orders them: a caller is answered only once its own record is
// durable, a release never overtakes a store, a resync waits for the
// writes in flight, and a write of unknown outcome is read back.

// call is an API call running on its own goroutine.
type call struct {
	done chan struct{}
	ip   net.IP
	err  error
}

func async(fn func() (net.IP, error)) *call {
	c := &call{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.ip, c.err = fn()
	}()
	return c
}

func (c *call) returned() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait returns once c has returned.
func (c *call) wait(g Gomega) *call {
	g.Eventually(c.done).WithTimeout(10 * time.Second).Should(BeClosed())
	return c
}

// waitQueuedOrReturned waits until c is either waiting for IPAM's writer
// (its request is queued behind the write in flight) or has returned.
func waitQueuedOrReturned(g Gomega, p *ipam.Plugin, c *call) {
	g.Eventually(func() bool { return c.returned() || ipam.QueuedRequests(p) > 0 }).
		WithTimeout(10 * time.Second).Should(BeTrue())
}

// stored reads the pod's allocation record ("" when there is none).
func stored(g Gomega, db kvdb.Broker, id podmodel.ID) string {
	kv, found, err := db.Get(context.Background(), ipam.AllocationPrefix+id.Namespace+"/"+id.Name)
	g.Expect(err).NotTo(HaveOccurred())
	if !found {
		return ""
	}
	return string(kv.Value)
}

func podKey(id podmodel.ID) string { return ipam.AllocationPrefix + id.Namespace + "/" + id.Name }

func boltFaults(t *testing.T) (*faultDB, kvdb.Broker) {
	t.Helper()
	db := openBolt(t, filepath.Join(t.TempDir(), "bolt.db"))
	t.Cleanup(func() { _ = db.Close() })
	return newFaultDB(db), db
}

// (a) A second AllocatePodIP for the same pod while the first one's write
// is in flight must not be answered with an address that is not durable:
// when that write fails, the second caller must not hold a withdrawn
// address.
func TestAllocateWaitsForTheSamePodsWriteInFlight(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	gt := newGate(podKey(pod1))
	fdb.setDecide(gt.decide)
	i := mustFixture(t, fixtureOpts{db: fdb}, nil).ipam

	first := async(func() (net.IP, error) { return i.AllocatePodIP(pod1, "", "") })
	g.Eventually(gt.entered).Should(Receive())
	second := async(func() (net.IP, error) { return i.AllocatePodIP(pod1, "", "") })
	waitQueuedOrReturned(g, i, second)
	gt.open <- failBefore

	g.Expect(first.wait(g).err).To(MatchError(ContainSubstring(errInjected.Error())))
	g.Expect(second.wait(g).err).NotTo(HaveOccurred(), "the second call is decided after the failed write, and its own write succeeds")
	g.Expect(i.GetPodIP(pod1)).NotTo(BeNil(), "the second caller's address is still held")
	g.Expect(i.GetPodIP(pod1).IP.String()).To(Equal(second.ip.String()))
	g.Expect(stored(g, db, pod1)).To(Equal(second.ip.String()), "and durable")
}

// (b) A release of a pod whose allocation is being stored must not
// overtake the store: the record must not outlive the release.
func TestReleaseNeverOvertakesTheStore(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	gt := newGate(podKey(pod1))
	fdb.setDecide(gt.decide)
	i := mustFixture(t, fixtureOpts{db: fdb}, nil).ipam

	alloc := async(func() (net.IP, error) { return i.AllocatePodIP(pod1, "", "") })
	g.Eventually(gt.entered).Should(Receive())
	release := async(func() (net.IP, error) { return nil, i.ReleasePodIP(pod1) })
	waitQueuedOrReturned(g, i, release)
	gt.open <- pass

	g.Expect(alloc.wait(g).err).NotTo(HaveOccurred())
	g.Expect(release.wait(g).err).NotTo(HaveOccurred())
	g.Expect(i.GetPodIP(pod1)).To(BeNil())
	g.Expect(stored(g, db, pod1)).To(BeEmpty(), "an orphan record would come back as a live allocation at the next restart")
}

// (c) A healing resync while an allocation is being stored must not lose
// the acknowledged address: no second pod may get it.
func TestResyncWaitsForTheWriteInFlight(t *testing.T) {
	g := NewWithT(t)
	fdb, _ := boltFaults(t)
	gt := newGate(podKey(pod1))
	fdb.setDecide(gt.decide)
	i := mustFixture(t, fixtureOpts{db: fdb}, nil).ipam

	alloc := async(func() (net.IP, error) { return i.AllocatePodIP(pod1, "", "") })
	g.Eventually(gt.entered).Should(Receive())
	ks := api.KubeStateData{}
	resync := async(func() (net.IP, error) {
		return nil, i.Resync(&api.HealingResync{Type: api.AfterError}, ks, 2, nil)
	})
	waitQueuedOrReturned(g, i, resync)
	gt.open <- pass

	g.Expect(alloc.wait(g).err).NotTo(HaveOccurred())
	g.Expect(resync.wait(g).err).NotTo(HaveOccurred())
	g.Expect(i.GetPodIP(pod1)).NotTo(BeNil(), "the acknowledged address survived the resync")
	g.Expect(i.GetPodIP(pod1).IP.String()).To(Equal(alloc.ip.String()))
	other, err := i.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.String()).NotTo(Equal(alloc.ip.String()), "two pods hold one address")
}

// (d) A write that timed out may still have committed. The truth is read
// back before anything is freed: bolt never holds an allocation that
// memory has given up (it would come back at the next restart next to the
// pod that got the address meanwhile).
func TestAWriteOfUnknownOutcomeIsReadBack(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	fdb.setDecide(func(ops []kvdb.Op) fault {
		if touches(ops, podKey(pod1)) {
			return failAfter
		}
		return pass
	})
	i := mustFixture(t, fixtureOpts{db: fdb}, nil).ipam

	ip, err := i.AllocatePodIP(pod1, "", "")
	rec := stored(g, db, pod1)
	g.Expect(rec).NotTo(BeEmpty(), "the fault applies the write before it fails")
	g.Expect(i.GetPodIP(pod1)).NotTo(BeNil(), "memory gave up an address that bolt holds")
	g.Expect(i.GetPodIP(pod1).IP.String()).To(Equal(rec))
	g.Expect(err).NotTo(HaveOccurred(), "the read-back found the record: the allocation is durable")
	g.Expect(ip.String()).To(Equal(rec))

	fdb.setDecide(nil)
	other, err := i.AllocatePodIP(pod2, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.String()).NotTo(Equal(rec))
}

// (d, continued) When the read-back fails too, nothing is freed and
// nothing is acknowledged; the next call for the pod stores its record
// again before it answers.
func TestAnUnknownOutcomeThatCannotBeReadBackKeepsTheAddress(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	i := mustFixture(t, fixtureOpts{db: fdb}, nil).ipam
	fdb.setDecide(func([]kvdb.Op) fault { return lostUnknown })
	fdb.setFailReads(true)
	_, err := i.AllocatePodIP(pod1, "", "")
	g.Expect(err).To(MatchError(ContainSubstring("unknown")))
	fdb.setFailReads(false)
	held := i.GetPodIP(pod1)
	g.Expect(held).NotTo(BeNil(), "an address of unknown state stays reserved")
	other, err := i.AllocatePodIP(pod2, "", "")
	g.Expect(err).To(MatchError(ContainSubstring(errInjected.Error())))
	g.Expect(other).To(BeNil())

	fdb.setDecide(nil)
	ip, err := i.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal(held.IP.String()))
	g.Expect(stored(g, db, pod1)).To(Equal(ip.String()), "re-stored before it was acknowledged")
}

// (d, continued) An ADD that adopts a pod-keyed address of unknown state
// and fails gives the address back to the pod-keyed allocation; when the
// delete of the pod-keyed record cannot be read back either, the record
// may be gone, so the address stays of unknown state: the next call
// stores the record again before it answers. Acknowledged without a
// record, the address would be lost at the next resync and handed to
// another pod.
func TestAnUndoneAdoptionKeepsTheAddressOfUnknownState(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	f := mustFixture(t, fixtureOpts{db: fdb}, nil)
	fdb.setDecide(func([]kvdb.Op) fault { return lostUnknown })
	fdb.setFailGet(func(key string) bool { return key == podKey(pod1) })
	_, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).To(MatchError(ContainSubstring("unknown")))
	held := f.ipam.GetPodIP(pod1)
	g.Expect(held).NotTo(BeNil())
	fdb.setDecide(func([]kvdb.Op) fault { return failBefore })
	_, err = addPod(f.ipam, pod1, att("c1", "eth0"))
	g.Expect(err).To(MatchError(ContainSubstring("allocation undone")), "the record of the attachment is read back: not stored")
	g.Expect(f.ipam.GetPodIP(pod1).IP).To(Equal(held.IP))
	g.Expect(stored(g, db, pod1)).To(BeEmpty())

	fdb.setDecide(nil)
	fdb.setFailGet(nil)
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip).To(Equal(held.IP))
	g.Expect(stored(g, db, pod1)).To(Equal(ip.String()), "re-stored before it was acknowledged")
	ks := kubePods()
	g.Expect(f.ipam.Resync(&api.HealingResync{Type: api.AfterError}, ks, 2, nil)).To(Succeed())
	g.Expect(ipOf(f.ipam.GetPodIP(pod1))).To(Equal(ip), "the acknowledged address survives a resync")
}

// (e) A record of a pod that Kubernetes does not have is released once
// the grace period has passed (not before), logged and counted.
func TestRecordsOfPodsAbsentFromKubernetesAreReleasedAfterTheGracePeriod(t *testing.T) {
	g := NewWithT(t)
	_, db := boltFaults(t)
	gone := podmodel.ID{Name: "gone", Namespace: "default"}
	g.Expect(db.Put(context.Background(), podKey(gone), []byte("1.2.128.11"))).To(Succeed())
	g.Expect(db.Put(context.Background(), podKey(pod1), []byte("1.2.128.10"))).To(Succeed())
	clk := newFakeClock()
	ks := kubePods(&podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: "1.2.128.10"})
	f := mustFixture(t, fixtureOpts{db: db, clock: clk, grace: 10 * time.Minute}, ks)
	f.beat(t)

	g.Expect(f.ipam.GetPodIP(gone)).NotTo(BeNil(), "held during the grace period")
	clk.Advance(9 * time.Minute)
	g.Consistently(func() net.IP { return ipOf(f.ipam.GetPodIP(gone)) }).
		WithTimeout(100 * time.Millisecond).ShouldNot(BeNil())
	clk.Advance(time.Minute)
	g.Eventually(func() net.IP { return ipOf(f.ipam.GetPodIP(gone)) }).WithTimeout(10 * time.Second).Should(BeNil())
	g.Expect(stored(g, db, gone)).To(BeEmpty())
	g.Expect(f.ipam.GetPodIP(pod1)).NotTo(BeNil(), "a pod Kubernetes has keeps its address")
	g.Expect(testutil.ToFloat64(ipam.AbsentReleases(f.ipam))).To(Equal(1.0))
}

// A pod that appears in Kubernetes during its grace period keeps its
// address.
func TestAPodThatAppearsDuringTheGracePeriodKeepsItsAddress(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: 10 * time.Minute}, kubePods())
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	pod := &podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: ip.String()}
	_, err = f.ipam.Update(&api.KubeStateChange{Resource: "pod", Key: podmodel.Key(pod.Name, pod.Namespace), NewValue: pod}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	clk.Advance(time.Hour)
	g.Consistently(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).
		WithTimeout(100 * time.Millisecond).ShouldNot(BeNil())
}

// Every DB resync reconciles with Kubernetes: pods deleted while the
// watch was cut off (their delete events lost) give their addresses back,
// not only at a restart; but never on one look: the first resync that
// misses them starts their grace period, and they go once a grace period
// later they are still missing (an emptied or replaced store looks the
// same as a lost delete).
func TestPodsDeletedDuringAWatchGapAreReleasedWhenSeenMissingTwice(t *testing.T) {
	g := NewWithT(t)
	_, db := boltFaults(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{db: db, yaml: benchConfig, clock: clk, grace: time.Minute}, kubePods())
	const n, deleted = 400, 250
	var pods []*podmodel.Pod
	for k := range n {
		id := podmodel.ID{Name: fmt.Sprintf("p%d", k), Namespace: "burst"}
		ip, err := f.ipam.AllocatePodIP(id, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		pods = append(pods, &podmodel.Pod{Name: id.Name, Namespace: id.Namespace, IpAddress: ip.String()})
	}
	ks := kubePods(pods...)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	clk.Advance(time.Minute) // the allocations are older than a grace period
	f.beat(t)
	ks = kubePods(pods[deleted:]...)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 3, nil)).To(Succeed())
	for _, pod := range pods {
		g.Expect(f.ipam.GetPodIP(podmodel.GetID(pod))).NotTo(BeNil(), "one look releases nothing: %s", pod.Name)
	}

	clk.Advance(time.Minute)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 4, nil)).To(Succeed())
	for k, pod := range pods {
		got := f.ipam.GetPodIP(podmodel.GetID(pod))
		if k < deleted {
			g.Expect(got).To(BeNil(), "deleted pod %s, missing twice a grace period apart", pod.Name)
		} else {
			g.Expect(got).NotTo(BeNil(), "live pod %s", pod.Name)
		}
	}
	kvs, _, err := db.List(context.Background(), ipam.AllocationPrefix)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(HaveLen(n - deleted))
}

// A DB resync whose state holds no pod at all (etcd restarted empty, a
// wrong endpoint) is no evidence: nothing is released by absence, however
// long it lasts, until a resync sees pods again; then the grace period
// starts from that resync.
func TestAnEmptyKubernetesStateReleasesNothing(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods())
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	ks := kubePods(&podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: ip.String()})
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	clk.Advance(time.Hour)

	empty := kubePods()
	for rev := 3; rev < 6; rev++ {
		g.Expect(f.ipam.Resync(&api.DBResync{KubeState: empty}, empty, rev, nil)).To(Succeed())
		clk.Advance(time.Hour)
	}
	g.Consistently(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).WithTimeout(100*time.Millisecond).
		Should(Equal(ip), "an empty state is no evidence")

	f.beat(t)
	ks = kubePods(bystander)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 6, nil)).To(Succeed())
	g.Expect(ipOf(f.ipam.GetPodIP(pod1))).To(Equal(ip), "the first look at a state with pods starts the grace period")
	clk.Advance(time.Minute)
	g.Eventually(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).WithTimeout(10*time.Second).Should(BeNil(),
		"still missing a grace period later: released")
}

// A pod re-created under the name of a deleted one (a StatefulSet pod)
// gets a new address before the Kubernetes state shows the new instance;
// a DB resync that read the state in between must not take the address
// from the running pod: a young allocation only starts a grace period.
func TestARecreatedPodKeepsItsNewAddressAcrossAStaleResync(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods())
	old, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	ks := kubePods(&podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: old.String()})
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	clk.Advance(time.Hour)
	g.Expect(f.ipam.ReleasePodIP(pod1)).To(Succeed()) // CNI DEL of the old instance
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")     // CNI ADD of the new one
	g.Expect(err).NotTo(HaveOccurred())
	f.beat(t)

	ks = kubePods(bystander) // read between the delete and the re-creation
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 3, nil)).To(Succeed())
	g.Expect(ipOf(f.ipam.GetPodIP(pod1))).To(Equal(ip), "the new instance keeps its address")
	clk.Advance(time.Minute)
	g.Eventually(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).WithTimeout(10*time.Second).Should(BeNil(),
		"a pod that stays missing is released after the grace period")
}

// A pod deleted during a watch gap keeps its address until it is seen
// missing again a grace period later (a failing store write, injected
// here, changes nothing of that). When the pod is re-created under the same
// name and gets that address acknowledged before the Kubernetes state
// shows it, the address is young again: neither the next stale resync
// nor the retried sweep may release it; the grace period starts at the
// acknowledgment.
func TestAnAddressAcknowledgedAfterAFailedReleaseOfADeletedPodIsYoung(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{db: fdb, clock: clk, grace: time.Minute}, kubePods())
	old, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	ks := kubePods(&podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: old.String()})
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	clk.Advance(time.Hour)

	fdb.setDecide(func(ops []kvdb.Op) fault {
		if touches(ops, podKey(pod1)) {
			return failBefore
		}
		return pass
	})
	f.beat(t)
	ks = kubePods(bystander) // deleted during a watch gap
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 3, nil)).To(Succeed())
	g.Expect(ipOf(f.ipam.GetPodIP(pod1))).To(Equal(old), "the release failed: the pod keeps its address")
	fdb.setDecide(nil)

	ip, err := f.ipam.AllocatePodIP(pod1, "", "") // the re-created pod's ADD
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip).To(Equal(old))
	f.beat(t)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 4, nil)).To(Succeed())
	g.Expect(ipOf(f.ipam.GetPodIP(pod1))).To(Equal(ip), "a stale resync does not release an acknowledged young address")
	clk.Advance(30 * time.Second) // past the sweep's retry delay
	g.Consistently(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).
		WithTimeout(100*time.Millisecond).Should(Equal(ip), "nor does the sweep")
	g.Expect(stored(g, db, pod1)).To(Equal(ip.String()))
	clk.Advance(30 * time.Second)
	g.Eventually(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).WithTimeout(10*time.Second).Should(BeNil(),
		"a pod that stays missing is released a grace period after the acknowledgment")
}

// A resync from the local mirror (etcd unreachable) releases nothing: the
// mirror may miss pods created since.
func TestALocalResyncReleasesNothing(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods(
		&podmodel.Pod{Name: pod2.Name, Namespace: pod2.Namespace, IpAddress: "1.2.128.11"}))
	_, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	ks := kubePods() // the mirror lacks both pods
	g.Expect(f.ipam.Resync(&api.DBResync{Local: true, KubeState: ks}, ks, 2, nil)).To(Succeed())
	clk.Advance(time.Hour)
	g.Consistently(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).
		WithTimeout(100 * time.Millisecond).ShouldNot(BeNil())
	g.Expect(f.ipam.GetPodIP(pod2)).NotTo(BeNil(), "a pod the previous state had is not taken for deleted by a local resync")
	f.beat(t)

	ks = kubePods(&podmodel.Pod{Name: pod2.Name, Namespace: pod2.Namespace, IpAddress: "1.2.128.11"})
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 3, nil)).To(Succeed())
	g.Expect(f.ipam.GetPodIP(pod1)).NotTo(BeNil(), "back on etcd, the grace period starts again")
	clk.Advance(time.Minute)
	g.Eventually(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).WithTimeout(10 * time.Second).Should(BeNil())
}

// (f) The next-fit cursor is stored with the allocations: after a restart
// a just-released top address is not handed out again at once.
func TestTheCursorSurvivesARestart(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{db: db}, nil)
	for _, id := range []podmodel.ID{pod1, pod2, pod3} {
		_, err := f.ipam.AllocatePodIP(id, "", "")
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(f.ipam.GetPodIP(pod3).IP.String()).To(Equal("1.2.128.12"))
	g.Expect(f.ipam.ReleasePodIP(pod3)).To(Succeed())
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	defer db.Close()
	f = mustFixture(t, fixtureOpts{db: db}, nil)
	ip, err := f.ipam.AllocatePodIP(pod4, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ip.String()).To(Equal("1.2.128.13"), "next-fit goes on after the last address handed out")
}

func ipOf(n *net.IPNet) net.IP {
	if n == nil {
		return nil
	}
	return n.IP
}

// Close waits for the writes the store took (their callers get their
// answer: pod1's held write and pod2's, queued behind it in the store)
// and fails the calls not decided; calls after Close fail at once.
func TestCloseFinishesTheWritesInFlightAndFailsTheQueue(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	gt := newGate(podKey(pod1))
	fdb.setDecide(gt.decide)
	f := mustFixture(t, fixtureOpts{db: fdb}, nil)
	i := f.ipam

	first := async(func() (net.IP, error) { return i.AllocatePodIP(pod1, "", "") })
	g.Eventually(gt.entered).Should(Receive())
	second := async(func() (net.IP, error) { return i.AllocatePodIP(pod2, "", "") })
	g.Eventually(func() int { return ipam.WritesInFlight(i) }).Should(Equal(2))
	deferred := async(func() (net.IP, error) { return nil, i.ReleasePodIP(pod1) })
	waitQueuedOrReturned(g, i, deferred)
	closed := async(func() (net.IP, error) { return nil, i.Close() })
	g.Consistently(closed.done).WithTimeout(50*time.Millisecond).ShouldNot(BeClosed(), "Close waits for the writes in flight")
	gt.open <- pass

	g.Expect(closed.wait(g).err).NotTo(HaveOccurred())
	g.Expect(first.wait(g).err).NotTo(HaveOccurred())
	g.Expect(stored(g, db, pod1)).To(Equal(first.ip.String()), "the release of pod1 was not decided")
	g.Expect(second.wait(g).err).NotTo(HaveOccurred())
	g.Expect(stored(g, db, pod2)).To(Equal(second.ip.String()))
	g.Expect(deferred.wait(g).err).To(MatchError(ContainSubstring("IPAM is closed")))
	_, err := i.AllocatePodIP(pod3, "", "")
	g.Expect(err).To(MatchError(ContainSubstring("IPAM is closed")))
}

// When nodesync loses the node ID (another node took it), IPAM hands out
// no address of the old pod subnet: it could be the other node's.
func TestNoAddressAfterTheNodeIDIsLost(t *testing.T) {
	g := NewWithT(t)
	f := mustFixture(t, fixtureOpts{}, nil)
	_, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	f.sync.id.Store(0)
	_, err = f.ipam.AllocatePodIP(pod2, "", "")
	g.Expect(err).To(MatchError(ipam.ErrNodeIDLost))
	g.Expect(err).To(MatchError(ContainSubstring("pod subnet 1.2.128.8/29 of node ID 1 (nodesync reports 0)")))
	g.Expect(f.ipam.GetPodIP(pod2)).To(BeNil())
}
