package ipam_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// The runtime witness (keeper/runtime.go): with the node's container
// runtime asked, a pod missing from Kubernetes keeps its address while
// the runtime has a sandbox of it, or cannot be asked, or was not asked
// since the grace period ended; and the GC the runtime never calls
// releases what two of its lists a GC period apart lack.

// look hands IPAM one answered list of the runtime.
func look(g Gomega, i *ipam.Plugin, sbs ...podmanager.Sandbox) {
	g.Expect(i.LookAtRuntime(context.Background(), func(context.Context) ([]podmanager.Sandbox, error) {
		return sbs, nil
	})).To(Succeed())
}

// lookFails hands IPAM a list that failed, as a runtime that is down.
func lookFails(g Gomega, i *ipam.Plugin) {
	g.Expect(i.LookAtRuntime(context.Background(), func(context.Context) ([]podmanager.Sandbox, error) {
		return nil, errors.New("connection refused")
	})).To(Succeed())
}

func sandbox(id string, pod podmodel.ID, uid string) podmanager.Sandbox {
	return podmanager.Sandbox{ID: id, Pod: pod, UID: uid, Ready: true}
}

// goneFromKubernetes makes pod1 (UID uidOld, container c1) a release
// candidate on fresh evidence and returns its address.
func goneFromKubernetes(t *testing.T, g Gomega, f *fixture) string {
	t.Helper()
	ip := addPodUID(g, f.ipam, pod1, uidOld, att("c1", "eth0"))
	kubeChange(g, f.ipam, pod1, uidOld, false)
	f.beat(t)
	kubeChange(g, f.ipam, pod1, uidOld, true) // the first look
	return ip
}

func held(g Gomega, i *ipam.Plugin, key podmanager.AttachmentKey, ip string, why string) {
	g.Consistently(func() string { return attIP(g, i, key) }).WithTimeout(100*time.Millisecond).Should(Equal(ip), why)
}

func TestASandboxKeepsTheAddressOfAPodMissingFromKubernetes(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute, runtime: true}, kubePods(bystander))
	ip := goneFromKubernetes(t, g, f)
	look(g, f.ipam, sandbox("c1", pod1, uidOld)) // before the grace period ends: no second look
	clk.Advance(time.Minute)
	held(g, f.ipam, att("c1", "eth0"), ip, "no list of the runtime since the grace period ended")

	look(g, f.ipam, sandbox("c1", pod1, uidOld))
	held(g, f.ipam, att("c1", "eth0"), ip, "the runtime has its sandbox (force-deleted, kubelet away)")
	clk.Advance(time.Hour)
	held(g, f.ipam, att("c1", "eth0"), ip, "still no newer list")

	look(g, f.ipam, sandbox("c7", pod1, "")) // another sandbox of the name, UID unknown: may be its own
	held(g, f.ipam, att("c1", "eth0"), ip, "a sandbox of its name whose UID is unknown")

	look(g, f.ipam, sandbox("c8", pod1, uidNew), sandbox("c9", pod2, uidOld))
	g.Eventually(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(10*time.Second).
		Should(BeEmpty(), "only another UID's sandbox of the name, and another pod's")
	g.Expect(testutil.ToFloat64(ipam.Released(f.ipam, "absent"))).To(Equal(1.0))
}

func TestARuntimeThatCannotBeAskedReleasesNothing(t *testing.T) {
	g := NewWithT(t)
	clk, reg := newFakeClock(), prometheus.NewRegistry()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute, runtime: true, metrics: reg}, kubePods(bystander))
	ip := goneFromKubernetes(t, g, f)
	n, blocked := ipam.CandidateCount(f.ipam)
	g.Expect(n).To(Equal(1))
	g.Expect(blocked).To(ContainSubstring("has not listed its pod sandboxes yet"))
	g.Expect(gaugeValue(g, reg, "contiv_ipam_absent_pod_releases_enabled")).To(BeZero())

	clk.Advance(time.Minute)
	lookFails(g, f.ipam)
	held(g, f.ipam, att("c1", "eth0"), ip, "the runtime cannot be asked")
	_, blocked = ipam.CandidateCount(f.ipam)
	g.Expect(blocked).To(ContainSubstring("container runtime cannot be asked"))
	g.Expect(blocked).To(ContainSubstring("connection refused"))
	g.Expect(gaugeValue(g, reg, "contiv_ipam_absent_pod_releases_enabled")).To(BeZero())

	look(g, f.ipam)
	g.Eventually(func() string { return attIP(g, f.ipam, att("c1", "eth0")) }).WithTimeout(10 * time.Second).Should(BeEmpty())
	_, blocked = ipam.CandidateCount(f.ipam)
	g.Expect(blocked).To(BeEmpty())
}

func TestTheGCAgainstTheRuntimeNeedsTwoListsAPeriodApart(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := mustFixture(t, fixtureOpts{clock: clk, runtime: true, runtimeGC: time.Minute}, kubePods(bystander))
	live := addPodUID(g, f.ipam, pod1, uidOld, att("c1", "eth0"))
	gone := addPodUID(g, f.ipam, pod2, uidOld, att("c2", "eth0"))
	plain := podmodel.ID{Name: "c3", Namespace: podmanager.ContainerNamespace}
	mustAdd(g, f.ipam, plain, att("c3", "eth0"))
	plainIP := attIP(g, f.ipam, att("c3", "eth0"))
	pod3 := podmodel.ID{Name: "pod3", Namespace: "default"}

	clk.Advance(time.Second)
	look(g, f.ipam, sandbox("c1", pod1, uidOld)) // the first GC look: c2 is a suspect
	late := addPodUID(g, f.ipam, pod3, uidOld, att("c4", "eth0"))
	clk.Advance(30 * time.Second)
	look(g, f.ipam, sandbox("c1", pod1, uidOld))
	held(g, f.ipam, att("c2", "eth0"), gone, "less than a GC period since the first look")

	clk.Advance(31 * time.Second)
	look(g, f.ipam, sandbox("c1", pod1, uidOld))
	g.Expect(attIP(g, f.ipam, att("c2", "eth0"))).To(BeEmpty(), "missing at two looks a period apart")
	g.Expect(testutil.ToFloat64(ipam.Released(f.ipam, "runtime"))).To(Equal(1.0))
	g.Expect(attIP(g, f.ipam, att("c1", "eth0"))).To(Equal(live))
	g.Expect(attIP(g, f.ipam, att("c3", "eth0"))).To(Equal(plainIP), "a plain container is not the runtime's")
	g.Expect(attIP(g, f.ipam, att("c4", "eth0"))).To(Equal(late), "made after the first look: missing once only")

	clk.Advance(time.Minute)
	lookFails(g, f.ipam)
	g.Expect(attIP(g, f.ipam, att("c4", "eth0"))).To(Equal(late), "a failed list is no look")
	clk.Advance(time.Minute)
	look(g, f.ipam, sandbox("c1", pod1, uidOld), sandbox("c4", pod3, uidOld))
	g.Expect(attIP(g, f.ipam, att("c4", "eth0"))).To(Equal(late), "its sandbox is listed now")
	g.Expect(testutil.ToFloat64(ipam.Released(f.ipam, "runtime"))).To(Equal(1.0))
}

// The REST view of the witness: a candidate whose sandbox the runtime
// still lists says so, and a runtime that cannot be asked is the reason
// nothing is released.
func TestReleaseCandidatesShowTheRuntime(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{clock: clk, runtime: true, ks: kubePods(bystander)})
	ip := addPodUID(g, f.ipam, pod1, uidOld, att("c1", "eth0"))
	kubeChange(g, f.ipam, pod1, uidOld, false)
	f.beat(t)
	kubeChange(g, f.ipam, pod1, uidOld, true)
	got := candidates(g, f)
	g.Expect(got.Running).To(BeFalse())
	g.Expect(got.Blocked).To(ContainSubstring("the container runtime has not listed its pod sandboxes yet"))

	look(g, f.ipam, sandbox("c1", pod1, uidOld))
	got = candidates(g, f)
	g.Expect(got.Running).To(BeTrue(), got.Blocked)
	g.Expect(got.Candidates).To(HaveLen(1))
	g.Expect(got.Candidates[0].SandboxLives).To(BeTrue())
	g.Expect(got.Candidates[0].IPs).To(Equal([]string{strings.Split(ip, "/")[0]}))

	lookFails(g, f.ipam)
	g.Expect(candidates(g, f).Blocked).To(ContainSubstring("the container runtime cannot be asked"))
	look(g, f.ipam)
	got = candidates(g, f)
	g.Expect(got.Running).To(BeTrue())
	g.Expect(got.Candidates[0].SandboxLives).To(BeFalse())
}
