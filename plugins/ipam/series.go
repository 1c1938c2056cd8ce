package ipam

import (
	"sync"
	"time"
)

// seriesLen is the number of one-minute buckets the series keeps: an
// hour.
const seriesLen = 60

// series counts the allocations and releases of the last hour in
// one-minute buckets, a ring of seriesLen. The keeper's goroutine writes
// it (keeper.Activity, at the keeper's clock); the status page reads it
// from the REST goroutines. Its own mutex guards it; both sides hold it
// for a few array operations only.
type series struct {
	mu      sync.Mutex
	buckets [seriesLen]bucket
}

// bucket is one minute of the ring: which minute (Unix minutes) and its
// counts. A bucket of another minute than the one asked for is empty.
type bucket struct {
	minute   int64
	allocs   uint32
	releases uint32
}

// minutePoint is one minute of the last hour as the page shows it.
type minutePoint struct {
	Start    time.Time
	Allocs   uint32
	Releases uint32
}

// Allocated implements keeper.Activity.
func (s *series) Allocated(at time.Time) { s.add(at, 1, 0) }

// Released implements keeper.Activity.
func (s *series) Released(at time.Time) { s.add(at, 0, 1) }

func (s *series) add(at time.Time, allocs, releases uint32) {
	m := unixMinute(at)
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &s.buckets[ringIndex(m)]
	if b.minute != m {
		*b = bucket{minute: m}
	}
	b.allocs += allocs
	b.releases += releases
}

// last fills out with the seriesLen minutes that end with now's, oldest
// first (now's minute last): a minute without events, or older than an
// hour, counts zero.
func (s *series) last(now time.Time, out *[seriesLen]minutePoint) {
	end := unixMinute(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range seriesLen {
		m := end - int64(seriesLen-1-i)
		p := minutePoint{Start: time.Unix(m*60, 0).In(now.Location())}
		if b := s.buckets[ringIndex(m)]; b.minute == m {
			p.Allocs, p.Releases = b.allocs, b.releases
		}
		out[i] = p
	}
}

// unixMinute is the minute of t since the epoch (floored).
func unixMinute(t time.Time) int64 {
	sec := t.Unix()
	if sec < 0 {
		return (sec - 59) / 60
	}
	return sec / 60
}

func ringIndex(minute int64) int {
	i := minute % seriesLen
	if i < 0 {
		i += seriesLen
	}
	return int(i)
}
