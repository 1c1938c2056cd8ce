package podmanager

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The latency histogram has every method from the start, with no calls;
// observe counts a call in its method only.
func TestLatencyHasEveryMethodFromTheStart(t *testing.T) {
	g := NewWithT(t)
	m := newPodmanagerMetrics()
	methods := []string{methodAdd, methodDelete, methodCheck, methodGC, methodStatus, methodConfirm}
	g.Expect(testutil.CollectAndCount(m, "contiv_podmanager_request_duration_seconds")).To(Equal(len(methods)))
	count := func(method string) uint64 {
		reg := prometheus.NewPedanticRegistry()
		g.Expect(reg.Register(m)).To(Succeed())
		mfs, err := reg.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		for _, mf := range mfs {
			if mf.GetName() != "contiv_podmanager_request_duration_seconds" {
				continue
			}
			for _, s := range mf.GetMetric() {
				if s.GetLabel()[0].GetValue() == method {
					return s.GetHistogram().GetSampleCount()
				}
			}
		}
		g.Expect(method).To(BeEmpty(), "no sample of the method")
		return 0
	}
	for _, method := range methods {
		g.Expect(count(method)).To(BeZero(), method)
	}
	m.observe(methodAdd, 0, 3*time.Millisecond)
	g.Expect(count(methodAdd)).To(Equal(uint64(1)))
	g.Expect(count(methodDelete)).To(BeZero())
}
