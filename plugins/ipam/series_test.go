package ipam

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

var _ keeper.Activity = (*series)(nil)

// seriesClock is a hand-moved time for the series.
type seriesClock struct{ now time.Time }

func (c *seriesClock) advance(d time.Duration) { c.now = c.now.Add(d) }

func counts(s *series, now time.Time) (allocs, releases [seriesLen]uint32) {
	var pts [seriesLen]minutePoint
	s.last(now, &pts)
	for i, p := range pts {
		allocs[i], releases[i] = p.Allocs, p.Releases
	}
	return allocs, releases
}

func TestSeriesCountsPerMinuteOverTheLastHour(t *testing.T) {
	g := NewWithT(t)
	clk := &seriesClock{now: time.Date(2030, 1, 2, 10, 0, 30, 0, time.UTC)}
	var s series

	s.Allocated(clk.now)
	s.Allocated(clk.now)
	s.Released(clk.now)
	a, r := counts(&s, clk.now)
	g.Expect(a[seriesLen-1]).To(Equal(uint32(2)), "this minute is the last point")
	g.Expect(r[seriesLen-1]).To(Equal(uint32(1)))
	g.Expect(a[:seriesLen-1]).To(HaveEach(uint32(0)))

	clk.advance(29 * time.Second) // 10:00:59: the same minute
	s.Allocated(clk.now)
	clk.advance(time.Second) // 10:01:00: the next
	s.Released(clk.now)
	a, r = counts(&s, clk.now)
	g.Expect(a[seriesLen-2]).To(Equal(uint32(3)))
	g.Expect(r[seriesLen-2]).To(Equal(uint32(1)))
	g.Expect(a[seriesLen-1]).To(BeZero())
	g.Expect(r[seriesLen-1]).To(Equal(uint32(1)))

	var pts [seriesLen]minutePoint
	s.last(clk.now, &pts)
	g.Expect(pts[seriesLen-1].Start).To(Equal(time.Date(2030, 1, 2, 10, 1, 0, 0, time.UTC)))
	g.Expect(pts[0].Start).To(Equal(time.Date(2030, 1, 2, 9, 2, 0, 0, time.UTC)), "60 minutes, oldest first")

	clk.advance(59 * time.Minute) // 11:00: the hour shown is 10:01-11:00
	a, r = counts(&s, clk.now)
	g.Expect(a[0]).To(BeZero(), "10:00 is more than an hour before 11:00's minute")
	g.Expect(r[0]).To(Equal(uint32(1)), "10:01 is the oldest minute shown")

	// A write to the ring slot of an old minute starts it again.
	clk.advance(time.Hour)
	s.Allocated(clk.now)
	a, r = counts(&s, clk.now)
	g.Expect(a[seriesLen-1]).To(Equal(uint32(1)), "not 1 + the counts of an hour ago")
	g.Expect(r).To(HaveEach(uint32(0)))
	g.Expect(a[:seriesLen-1]).To(HaveEach(uint32(0)))
}

func TestSeriesAfterAGapShowsNoStaleMinutes(t *testing.T) {
	g := NewWithT(t)
	clk := &seriesClock{now: time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)}
	var s series
	for range 5 {
		s.Allocated(clk.now)
		clk.advance(time.Minute)
	}
	clk.advance(3 * time.Hour)
	a, r := counts(&s, clk.now)
	g.Expect(a).To(HaveEach(uint32(0)))
	g.Expect(r).To(HaveEach(uint32(0)))
}

func TestCNIErrorsKeepTheLast20NewestFirst(t *testing.T) {
	g := NewWithT(t)
	var c cniErrors
	g.Expect(c.latest(nil)).To(BeEmpty())
	for i := range 25 {
		c.add(podmanager.CNIFailure{Code: uint32(i)})
	}
	got := c.latest(nil)
	g.Expect(got).To(HaveLen(cniErrorsLen))
	g.Expect(got[0].Code).To(Equal(uint32(24)))
	g.Expect(got[cniErrorsLen-1].Code).To(Equal(uint32(5)))
}

func TestPoolFillLevels(t *testing.T) {
	cases := []struct {
		name                string
		s                   keeper.PoolStats
		width, percent, lvl string
		used                uint64
	}{
		{name: "empty", s: keeper.PoolStats{Total: 100, Free: 100}, width: "0.0", percent: "0.0", lvl: "ok"},
		{name: "80% is not over 80", s: keeper.PoolStats{Total: 100, Assigned: 80}, width: "288.0", percent: "80.0", lvl: "ok", used: 80},
		{name: "over 80", s: keeper.PoolStats{Total: 1000, Assigned: 801}, width: "288.4", percent: "80.1", lvl: "warn", used: 801},
		{name: "95% is not over 95", s: keeper.PoolStats{Total: 100, Assigned: 90, Cooldown: 3, Excluded: 2}, width: "342.0", percent: "95.0", lvl: "warn", used: 95},
		{name: "over 95", s: keeper.PoolStats{Total: 100, Assigned: 96}, width: "345.6", percent: "96.0", lvl: "crit", used: 96},
		{name: "full", s: keeper.PoolStats{Total: 4, Assigned: 4, Family: keeper.IPv6}, width: "360.0", percent: "100.0", lvl: "crit", used: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			pv := poolOf(tc.s, false)
			g.Expect(pv.Width).To(Equal(tc.width))
			g.Expect(pv.Percent).To(Equal(tc.percent))
			g.Expect(pv.Level).To(Equal(tc.lvl))
			g.Expect(pv.Used).To(Equal(tc.used))
		})
	}
	g := NewWithT(t)
	pv := poolOf(keeper.PoolStats{Assigned: 7}, true)
	g.Expect(pv.Width).To(Equal("0"), "an external pool has no known size: no bar")
	g.Expect(pv.Used).To(Equal(uint64(7)))
}
