package ipam_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// The evidence rule (keeper/evidence.go): an address is released by
// absence only when a fresh contiv-ksr mirror, newer than the allocation,
// misses its pod (by name and UID) twice, a grace period apart.

const (
	uidOld = "0f5e6a1c-3b9d-4c1e-9a57-00000000000a"
	uidNew = "0f5e6a1c-3b9d-4c1e-9a57-00000000000b"
)

// addPodUID is addPod with K8S_POD_UID.
func addPodUID(g Gomega, i *ipam.Plugin, pod podmodel.ID, uid string, key podmanager.AttachmentKey) string {
	ev := podmanager.NewAddPod()
	ev.Pod, ev.PodUID, ev.Key, ev.NetworkNamespace = pod, uid, key, "/var/run/netns/"+key.ContainerID
	_, err := i.Update(ev, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ev.Wait(context.Background())).To(Succeed())
	return attIP(g, i, key)
}

// kubeChange delivers a pod of the Kubernetes state (put) or its delete.
func kubeChange(g Gomega, i *ipam.Plugin, id podmodel.ID, uid string, deleted bool) {
	pod := &podmodel.Pod{Name: id.Name, Namespace: id.Namespace, Uid: uid}
	ev := &api.KubeStateChange{Resource: podmodel.Keyword, Key: podmodel.Key(id.Name, id.Namespace), NewValue: pod}
	if deleted {
		ev.NewValue, ev.PrevValue = nil, pod
	}
	_, err := i.Update(ev, nil)
	g.Expect(err).NotTo(HaveOccurred())
}

// B2: a pod re-created under its name (a StatefulSet) gets its new
// container ADDed before the old pod's delete event arrives. The late
// delete, of the old UID, never releases the new pod's address; the old
// pod's own address is released only once it is missing twice, a grace
// period apart.
func TestALateDeleteOfAReusedNameKeepsTheNewPodsAddress(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods(bystander))
	oldIP := addPodUID(g, f.ipam, pod1, uidOld, att("c1", "eth0"))
	kubeChange(g, f.ipam, pod1, uidOld, false)
	f.beat(t)

	newIP := addPodUID(g, f.ipam, pod1, uidNew, att("c2", "eth0"))
	g.Expect(newIP).NotTo(Equal(oldIP))
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal(oldIP), "the old pod may still run: its address is not obsolete")
	kubeChange(g, f.ipam, pod1, uidOld, true) // the late delete of the old pod
	kubeChange(g, f.ipam, pod1, uidNew, false)
	kubeChange(g, f.ipam, pod1, uidOld, true) // and once more, stale
	f.beat(t)
	g.Expect(attIP(g, f.ipam, att("c2", "eth0"))).To(Equal(newIP))

	clk.Advance(time.Minute)
	g.Eventually(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(10*time.Second).Should(BeEmpty(),
		"the old UID is missing twice a grace period apart")
	g.Consistently(func() string { return attIP(g, f.ipam, att("c2", "eth0")) }).WithTimeout(100*time.Millisecond).
		Should(Equal(newIP), "the pod of the name now is the new one")
}

// The UID is kept in the allocation's record: after a restart, a state
// holding the name with another UID makes the restored allocation a
// release candidate, and the same UID keeps it.
func TestThePodUIDSurvivesARestart(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "bolt.db")
	db := openBolt(t, path)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{db: db, clock: clk, grace: time.Minute}, kubePods(bystander))
	ipOld := addPodUID(g, f.ipam, pod1, uidOld, att("c1", "eth0"))
	ipOther := addPodUID(g, f.ipam, pod2, uidOld, att("c9", "eth0"))
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	db = openBolt(t, path)
	clk.Advance(time.Second)
	ks := kubePods(bystander, &podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, Uid: uidNew},
		&podmodel.Pod{Name: pod2.Name, Namespace: pod2.Namespace, Uid: uidOld})
	f = mustFixture(t, fixtureOpts{db: db, clock: clk, grace: time.Minute}, ks)
	f.beat(t)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	clk.Advance(time.Minute)
	g.Eventually(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(10*time.Second).Should(BeEmpty(),
		"%s of UID %s: the state holds the name with another UID", ipOld, uidOld)
	g.Expect(attIP(g, f.ipam, att("c9", "eth0"))).To(Equal(ipOther), "the same UID: not missing")
}

// B5: without contiv-ksr (no mirror marker in etcd), a live state that
// lacks a pod is no evidence: nothing is released, however long, and the
// agent says why; the first marker is only a baseline (it may be a dead
// contiv-ksr's last word), the second one starts the grace period.
func TestWithoutAMirrorNothingIsReleasedByAbsence(t *testing.T) {
	g := NewWithT(t)
	clk, reg := newFakeClock(), prometheus.NewRegistry()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute, metrics: reg}, kubePods(bystander))
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	ip := attIP(g, f.ipam, att("c1", "eth0"))
	for rev := 2; rev < 5; rev++ {
		clk.Advance(time.Hour)
		ks := kubePods(bystander)
		g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, rev, nil)).To(Succeed())
	}
	kubeChange(g, f.ipam, pod1, "", true)
	clk.Advance(time.Hour)
	g.Consistently(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(100*time.Millisecond).
		Should(Equal(ip), "no mirror: no evidence")
	g.Expect(gaugeValue(g, reg, "contiv_ipam_absent_pod_releases_enabled")).To(BeZero())

	f.deliver(t) // a first marker: a baseline only
	f.hb = f.hb.Add(time.Second)
	clk.Advance(time.Hour)
	g.Consistently(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(100*time.Millisecond).
		Should(Equal(ip), "one marker is no sign of life")

	f.deliver(t) // the next heartbeat
	g.Expect(gaugeValue(g, reg, "contiv_ipam_absent_pod_releases_enabled")).To(Equal(1.0))
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal(ip), "the first look with a fresh mirror")
	clk.Advance(time.Minute)
	g.Eventually(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(10 * time.Second).Should(BeEmpty())
}

// A marker that stops changing goes stale after three heartbeats: grace
// periods that end meanwhile release nothing; once contiv-ksr beats
// again, the pods still missing are released a grace period later.
func TestAStaleMirrorReleasesNothingUntilItBeatsAgain(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{clock: clk})
	f.interval = "10s"
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	ip := attIP(g, f.ipam, att("c1", "eth0"))
	ks := kubePods(bystander)
	f.beat(t)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	g.Expect(candidates(g, f).Candidates).To(HaveLen(1))
	g.Expect(absentPodReleases(g, f)).To(Equal(ipam.AbsentPodReleases{Enabled: true}))

	clk.Advance(31 * time.Second) // contiv-ksr stopped: no heartbeat for three periods
	got := candidates(g, f)
	g.Expect(got.Running).To(BeFalse())
	g.Expect(got.Blocked).To(ContainSubstring("has not changed for 31s"))
	g.Expect(absentPodReleases(g, f).Blocked).To(Equal(got.Blocked), "GET /contiv/v1/ipam says why too")
	clk.Advance(time.Hour) // far past the grace period
	g.Consistently(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(100*time.Millisecond).
		Should(Equal(ip), "a stale mirror is no evidence")

	f.beat(t) // back: the first look of a new fresh stretch
	g.Consistently(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(100*time.Millisecond).
		Should(Equal(ip), "the grace period starts again")
	for range 61 { // the default grace period, 10m, with a heartbeat every 10s
		clk.Advance(10 * time.Second)
		f.beat(t)
	}
	g.Eventually(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(10*time.Second).Should(BeEmpty(),
		"missing at two looks a grace period apart, with the mirror fresh between them")
}

// An allocation made after the newest marker is not judged by it: the
// mirror may not have seen the pod yet.
func TestAMarkerOlderThanTheAllocationIsNoEvidence(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{clock: clk})
	f.beat(t)
	clk.Advance(time.Second)
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	ks := kubePods(bystander)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	g.Expect(candidates(g, f).Candidates).To(BeEmpty(), "the marker is older than the allocation")
	f.beat(t)
	g.Expect(candidates(g, f).Candidates).To(HaveLen(1), "a marker newer than the allocation")
}

// A store emptier than the marker says (half of its pods gone: a store
// restored from an old snapshot, a wrong endpoint) is no evidence; a
// marker whose heartbeat went back (the old snapshot's) is no sign of
// life either.
func TestAStoreEmptierThanTheMarkerOrAnOldMarkerIsNoEvidence(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{clock: clk})
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	f.pods = 10
	f.beat(t)
	ks := kubePods(bystander) // 1 pod, the marker says 10
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	got := candidates(g, f)
	g.Expect(got.Blocked).To(ContainSubstring("holds 1 pods, contiv-ksr's mirror marker says 10"))
	g.Expect(got.Candidates).To(BeEmpty())

	f.pods = 1
	f.hb = f.hb.Add(-time.Hour) // an old snapshot's marker
	clk.Advance(time.Millisecond)
	f.deliver(t)
	g.Expect(candidates(g, f).Blocked).To(ContainSubstring("says 10"), "an older heartbeat changes nothing")
	f.hb = f.hb.Add(2 * time.Hour)
	f.deliver(t)
	g.Expect(candidates(g, f).Candidates).To(HaveLen(1))
}

// Each allocation of a name is missing for a whole grace period before
// it goes: here the old UID's has been missing for most of one when the
// new UID's goes missing too (its pod deleted); the sweep that finds the
// old one due must not take the new one with it (the evidence model test
// found this).
func TestAnAllocationMissingSinceLaterWaitsItsOwnGracePeriod(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods(bystander))
	addPodUID(g, f.ipam, pod1, uidOld, att("c1", "eth0"))
	kubeChange(g, f.ipam, pod1, uidOld, false)
	newIP := addPodUID(g, f.ipam, pod1, uidNew, att("c2", "eth0"))
	kubeChange(g, f.ipam, pod1, uidNew, false) // c1's UID is missing from now
	f.beat(t)
	clk.Advance(50 * time.Second)
	kubeChange(g, f.ipam, pod1, uidNew, true) // c2's pod deleted: missing from now
	f.beat(t)
	clk.Advance(15 * time.Second) // c1 missing for 65s, c2 for 15s
	g.Consistently(func() string { return attIP(g, f.ipam, att("c2", "eth0")) }).WithTimeout(100*time.Millisecond).
		Should(Equal(newIP), "missing for less than a grace period")
	f.beat(t)
	clk.Advance(time.Minute)
	g.Eventually(func() string { return attIP(g, f.ipam, att("c2", "eth0")) }).WithTimeout(10 * time.Second).Should(BeEmpty())
	g.Eventually(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(10 * time.Second).Should(BeEmpty())
}

// A grace period that starts while the sweep timer is set for a later
// deadline (here a CNI reservation's, ten minutes away) still ends on
// time: the timer is set again (the chaos test found this).
func TestAGracePeriodEndsOnTimeBehindALaterDeadline(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods(bystander, &podmodel.Pod{Name: pod2.Name, Namespace: pod2.Namespace}))
	ev := podmanager.NewAddPod()
	ev.Pod, ev.Key, ev.NetworkNamespace, ev.Confirms = pod2, att("c2", "eth0"), "/var/run/netns/c2", true
	_, err := f.ipam.Update(ev, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ev.Wait(context.Background())).To(Succeed())
	g.Expect(ev.Reservation).NotTo(BeEmpty(), "a reservation: the sweep timer is set for its deadline")
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	f.beat(t) // pod1 is missing: its grace period starts
	clk.Advance(time.Minute)
	// the release counter, not a read: a read re-arms the timer itself
	g.Eventually(func() float64 { return testutil.ToFloat64(ipam.AbsentReleases(f.ipam)) }).WithTimeout(10*time.Second).
		Should(Equal(1.0), "released when its grace period ends, not at the reservation's deadline")
}

// A pod missing at a look before contiv-ksr stopped may have been there
// while it was stopped (its informer lagged, then it stopped before it
// mirrored the pod): when contiv-ksr beats again, the grace period starts
// again; both looks of a release are made within one fresh stretch (the
// evidence model test found this).
func TestAGracePeriodStartsAgainAfterAStaleStretch(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods(bystander))
	f.interval = "10s"
	mustAdd(g, f.ipam, pod1, att("c1", "eth0"))
	ip := attIP(g, f.ipam, att("c1", "eth0"))
	f.beat(t) // the first look misses pod1: its period starts
	clk.Advance(90 * time.Second)
	f.beat(t) // contiv-ksr is back after a stretch without heartbeats
	g.Consistently(func() float64 { return testutil.ToFloat64(ipam.AbsentReleases(f.ipam)) }).
		WithTimeout(100*time.Millisecond).Should(BeZero(), "the period starts again")
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal(ip))
	for range 6 {
		clk.Advance(10 * time.Second)
		f.beat(t)
	}
	g.Eventually(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(10 * time.Second).Should(BeEmpty())
}

// Every release is counted with its reason, whatever its path: a CNI
// DEL, a GC, the pod's new container, and a pod missing twice on fresh
// evidence.
func TestEveryReleaseIsCountedWithItsReason(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute}, kubePods(bystander,
		&podmodel.Pod{Name: pod2.Name, Namespace: pod2.Namespace}))
	count := func(reason string) float64 { return testutil.ToFloat64(ipam.Released(f.ipam, reason)) }
	mustAdd(g, f.ipam, pod2, att("d1", "eth0"))
	_, err := deletePod(f.ipam, pod2, att("d1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(count("call")).To(Equal(1.0))

	mustAdd(g, f.ipam, pod2, att("d2", "eth0"))
	mustAdd(g, f.ipam, pod2, att("d3", "eth0")) // a new container of the pod
	g.Expect(count("obsolete")).To(Equal(1.0))
	g.Expect(gcPods(f.ipam, "net")).To(Succeed())
	g.Expect(count("gc")).To(Equal(1.0))

	mustAdd(g, f.ipam, pod1, att("c1", "eth0")) // missing from Kubernetes
	f.beat(t)
	clk.Advance(time.Minute)
	g.Eventually(func() float64 { return count("absent") }).WithTimeout(10 * time.Second).Should(Equal(1.0))
}

// absentPodReleases is absentPodReleases of GET /contiv/v1/ipam.
func absentPodReleases(g Gomega, f *restFixture) ipam.AbsentPodReleases {
	status, body := f.srv.Do(http.MethodGet, ipam.IPAMPath, "", nil)
	g.Expect(status).To(Equal(http.StatusOK), body)
	var info ipam.NodeIPAMInfo
	g.Expect(json.Unmarshal([]byte(body), &info)).To(Succeed(), body)
	g.Expect(info.AbsentPodReleases).NotTo(BeNil())
	return *info.AbsentPodReleases
}
