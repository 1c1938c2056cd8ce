package ipam_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// samples are the samples of name in reg, each keyed by its labels
// ("k=v,k=v" in label-name order; "" without labels).
func samples(g Gomega, reg *prometheus.Registry, name string) map[string]float64 {
	mfs, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for i, l := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			out[key] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return -1
}

// The mirror marker's age, as the agent sees it, is absent until the
// marker changed once, then grows with the agent's clock and drops to
// zero at the next change; the stale-after gauge is three heartbeats.
func TestMirrorMarkerAgeGauge(t *testing.T) {
	g := NewWithT(t)
	clk, reg := newFakeClock(), prometheus.NewRegistry()
	f := mustFixture(t, fixtureOpts{clock: clk, metrics: reg}, kubePods())
	f.beater.interval = "10s"
	g.Expect(samples(g, reg, "contiv_ipam_mirror_marker_age_seconds")).To(BeEmpty(), "no marker yet")

	f.beat(t) // a baseline and a change
	g.Expect(samples(g, reg, "contiv_ipam_mirror_marker_age_seconds")).To(Equal(map[string]float64{"": 0}))
	g.Expect(samples(g, reg, "contiv_ipam_mirror_marker_stale_after_seconds")).To(Equal(map[string]float64{"": 30}))

	clk.Advance(45 * time.Second)
	g.Expect(samples(g, reg, "contiv_ipam_mirror_marker_age_seconds")).To(Equal(map[string]float64{"": 45}))
	g.Expect(samples(g, reg, "contiv_ipam_absent_pod_releases_enabled")).To(Equal(map[string]float64{"": 0}),
		"older than stale-after: no absent pod is released")

	f.beat(t)
	g.Expect(samples(g, reg, "contiv_ipam_mirror_marker_age_seconds")).To(Equal(map[string]float64{"": 0}))
}

// The pool gauges by state carry the family; assigned and free move with
// an allocation; the store's writes in flight are exported (settled: 0).
func TestPoolAddressesGaugeHasTheFamily(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	f := mustFixture(t, fixtureOpts{metrics: reg}, kubePods())
	before := samples(g, reg, "contiv_ipam_pod_ip_pool_addresses")
	var subnet string
	for key := range before {
		g.Expect(key).To(MatchRegexp(`^family=ipv4,state=(assigned|cooldown|excluded|free),subnet=.+$`))
		subnet = key[strings.Index(key, ",subnet=")+len(",subnet="):]
	}
	g.Expect(before).To(HaveLen(4))
	free, assigned := "family=ipv4,state=free,subnet="+subnet, "family=ipv4,state=assigned,subnet="+subnet
	g.Expect(before).To(HaveKey(free))

	_, err := f.ipam.AllocatePodIP(podmodel.ID{Namespace: "default", Name: "metrics"}, "", "")
	g.Expect(err).NotTo(HaveOccurred())
	after := samples(g, reg, "contiv_ipam_pod_ip_pool_addresses")
	g.Expect(after[free]).To(Equal(before[free] - 1))
	g.Expect(after[assigned]).To(Equal(before[assigned] + 1))
	g.Expect(samples(g, reg, "contiv_ipam_store_writes_in_flight")).To(Equal(map[string]float64{"": 0}))
}

// The keeper's counters have every known label value from the start, at
// zero, so that an alert on increase() sees the first failure or release.
func TestKeeperCountersStartAtZero(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	mustFixture(t, fixtureOpts{metrics: reg}, kubePods())
	g.Expect(samples(g, reg, "contiv_ipam_store_failures_total")).To(Equal(map[string]float64{
		"outcome=not applied": 0, "outcome=unknown": 0}))
	g.Expect(samples(g, reg, "contiv_ipam_pod_ips_reclaimed_total")).To(Equal(map[string]float64{
		"reason=absent": 0, "reason=expired": 0}))
	g.Expect(samples(g, reg, "contiv_ipam_requests_refused_total")).To(Equal(map[string]float64{
		"reason=queue": 0, "reason=store": 0}))
	released := samples(g, reg, "contiv_ipam_pod_ips_released_total")
	for _, reason := range []string{"call", "gc", "obsolete", "operator", "pool", "runtime", "expired", "absent"} {
		g.Expect(released).To(HaveKeyWithValue("reason="+reason, 0.0))
	}
}
