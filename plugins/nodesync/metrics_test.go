package nodesync

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every label value is exported at zero from the start, so that an alert
// on increase() sees the first conflict; the counters then move.
func TestNodesyncCountersStartAtZero(t *testing.T) {
	g := NewWithT(t)
	m := newNodesyncMetrics()
	g.Expect(testutil.CollectAndCount(m, "contiv_nodesync_conflicts_total")).To(Equal(2))
	g.Expect(testutil.CollectAndCount(m, "contiv_nodesync_node_id_changes_total")).To(Equal(2))
	for _, kind := range []string{conflictID, conflictName} {
		g.Expect(testutil.ToFloat64(m.conflicts.WithLabelValues(kind))).To(BeZero(), kind)
	}
	m.conflicts.WithLabelValues(conflictID).Inc()
	g.Expect(testutil.ToFloat64(m.conflicts.WithLabelValues(conflictID))).To(Equal(1.0))
	g.Expect(testutil.CollectAndCount(m, "contiv_nodesync_conflicts_total")).To(Equal(2))
}
