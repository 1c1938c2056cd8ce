package cnibench

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestPercentile pins the nearest-rank quantile the benchmarks report.
func TestPercentile(t *testing.T) {
	ten := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{7}, 0.99, 7},
		{"median of ten", ten, 0.5, 5},
		{"p99 of ten is the largest", ten, 0.99, 10},
		{"p10 of ten", ten, 0.1, 1},
		{"p100", ten, 1, 10},
		{"tiny p is the smallest", ten, 0.001, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(percentile(c.sorted, c.p)).To(Equal(c.want))
		})
	}
}
