package ipam_test

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// A pod the Kubernetes state lacks is a release candidate, visible
// before anything is freed: listed over REST with its addresses and
// when it goes (if still missing then), and counted in a gauge; seen
// again, it stops being one.
func TestReleaseCandidatesAreVisibleBeforeAnythingIsFreed(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	f := newRESTFixture(t, restOpts{clock: clk})
	ip, err := f.ipam.AllocatePodIP(pod1, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	web := &podmodel.Pod{Name: pod1.Name, Namespace: pod1.Namespace, IpAddress: ip.String()}
	ks := kubePods(web)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	g.Expect(candidates(g, f).Candidates).To(BeEmpty())

	clk.Advance(time.Hour)
	ks = kubePods(bystander)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 3, nil)).To(Succeed())
	got := candidates(g, f)
	g.Expect(got.Running).To(BeFalse())
	g.Expect(got.Blocked).To(ContainSubstring("no contiv-ksr mirror marker"))
	g.Expect(got.Candidates).To(BeEmpty(), "without a mirror marker, absence is no evidence")
	f.beat(t)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 3, nil)).To(Succeed())
	got = candidates(g, f)
	g.Expect(got.Running).To(BeTrue())
	g.Expect(got.Blocked).To(BeEmpty())
	g.Expect(got.GracePeriod).To(Equal("10m0s"))
	g.Expect(got.Candidates).To(Equal([]ipam.ReleaseCandidate{{Pod: pod1.String(), IPs: []string{ip.String()},
		MissingSince: clk.Now().UTC().Format(time.RFC3339), ReleaseAt: clk.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)}}))
	g.Expect(ipOf(f.ipam.GetPodIP(pod1))).To(Equal(ip), "a candidate is not released")

	ks = kubePods(web)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 4, nil)).To(Succeed())
	g.Expect(candidates(g, f).Candidates).To(BeEmpty(), "seen again: no longer a candidate")
}

func TestReleaseCandidatesGauge(t *testing.T) {
	g := NewWithT(t)
	clk, reg := newFakeClock(), prometheus.NewRegistry()
	f := mustFixture(t, fixtureOpts{clock: clk, grace: time.Minute, metrics: reg}, kubePods())
	gauge := func() float64 { return gaugeValue(g, reg, "contiv_ipam_release_candidates") }
	g.Expect(gauge()).To(BeZero())
	for _, id := range []podmodel.ID{pod1, pod2} {
		_, err := f.ipam.AllocatePodIP(id, "", "")
		g.Expect(err).NotTo(HaveOccurred())
	}
	clk.Advance(time.Hour)
	f.beat(t)
	ks := kubePods(bystander)
	g.Expect(f.ipam.Resync(&api.DBResync{KubeState: ks}, ks, 2, nil)).To(Succeed())
	g.Expect(gauge()).To(Equal(2.0))
	clk.Advance(time.Minute)
	g.Eventually(func() net.IP { return ipOf(f.ipam.GetPodIP(pod1)) }).WithTimeout(10 * time.Second).Should(BeNil())
	g.Eventually(gauge).WithTimeout(10*time.Second).Should(BeZero(),
		"released candidates are no longer counted")
}

func candidates(g Gomega, f *restFixture) ipam.ReleaseCandidates {
	status, body := f.srv.Do(http.MethodGet, ipam.CandidatesPath, "", nil)
	g.Expect(status).To(Equal(http.StatusOK), body)
	var out ipam.ReleaseCandidates
	g.Expect(json.Unmarshal([]byte(body), &out)).To(Succeed(), body)
	return out
}

// gaugeValue is the value of the unlabelled gauge name in reg.
func gaugeValue(g Gomega, reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, mf := range mfs {
		if mf.GetName() == name {
			g.Expect(mf.GetMetric()).To(HaveLen(1))
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	g.Expect(name).To(BeEmpty(), "no such metric")
	return 0
}
