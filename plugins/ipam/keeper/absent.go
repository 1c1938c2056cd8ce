package keeper

import (
	"slices"
	"time"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Clock is the keeper's time source (a fake one in tests).
type Clock interface {
	Now() time.Time
	// NewTimer returns a channel that receives once d has passed, and a
	// function that stops the timer.
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

// RealClock is the system clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// sweepTimer wakes the keeper when the grace period of an absent pod
// ends; c is nil while nothing is due (a nil channel never fires).
type sweepTimer struct {
	clock Clock
	c     <-chan time.Time
	stop  func() bool
	at    time.Time // when c fires
	// notBefore delays the next sweep after one whose writes failed.
	notBefore time.Time
}

func (s *sweepTimer) stopTimer() {
	if s.stop != nil {
		s.stop()
	}
	s.c, s.stop, s.at = nil, nil, time.Time{}
}

// fired forgets the timer that just fired.
func (s *sweepTimer) fired() { s.c, s.stop, s.at = nil, nil, time.Time{} }

// set arms the timer for at, unless it is armed for that time already.
func (s *sweepTimer) set(at time.Time) {
	if at.Before(s.notBefore) {
		at = s.notBefore
	}
	if s.c != nil && s.at.Equal(at) {
		return
	}
	s.stopTimer()
	s.c, s.stop = s.clock.NewTimer(at.Sub(s.clock.Now()))
	s.at = at
}

// sweepRetryDelay is the pause after a sweep whose deletes failed.
const sweepRetryDelay = 5 * time.Second

// armSweep sets the sweep timer for the end of the earliest grace period
// (none is due while absence is no evidence: see evidence.go), the
// moment contiv-ksr's marker goes stale, or the earliest deadline of a
// reservation, whichever comes first.
func (k *Keeper) armSweep() {
	var first time.Time
	if k.tab != nil {
		first = k.tab.earliestDeadline()
		for _, w := range []time.Time{k.tab.earliestWarm(), k.nextShrink()} {
			if !w.IsZero() && (first.IsZero() || w.Before(first)) {
				first = w
			}
		}
	}
	why := k.evidence()
	if k.tab != nil {
		k.reportEvidence(why)
		k.reportRuntime()
		k.metrics.evidence.Set(boolGauge(k.releaseBlock() == ""))
	}
	if why == "" && !k.view.empty {
		for _, w := range append(k.absentEnds(), k.staleAt().Add(time.Millisecond)) {
			if first.IsZero() || w.Before(first) {
				first = w
			}
		}
	}
	if first.IsZero() {
		k.sweep.stopTimer()
		return
	}
	k.sweep.set(first)
}

// absentEnds are the ends of the grace periods of the absent pods; a
// period that has ended counts only while its pod can be decided (see
// decidable): otherwise the next look at the runtime arms the sweep.
func (k *Keeper) absentEnds() []time.Time {
	out := make([]time.Time, 0, len(k.absent))
	now := k.clock.Now()
	for _, a := range k.absent {
		end := a.since.Add(k.cfg.AbsentPodGracePeriod)
		if end.After(now) || k.decidable(a, end) {
			out = append(out, end)
		}
	}
	return out
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// due lists the absent pods whose grace period is over, in a stable order.
func (k *Keeper) due() []podmodel.ID {
	now := k.clock.Now()
	var ids []podmodel.ID
	for id, a := range k.absent {
		if now.Sub(a.since) >= k.cfg.AbsentPodGracePeriod {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, comparePods)
	return ids
}

func comparePods(a, b podmodel.ID) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// releaseAbsent releases the addresses of the pods whose grace period is
// over and that this second look still misses, while that is evidence
// (see evidence.go); each release is logged and counted. Only the
// allocations that are missing go: a pod of the name with another UID
// keeps its own.
func (k *Keeper) releaseAbsent() {
	if k.tab == nil || k.view.empty || k.evidence() != "" {
		return
	}
	b := newBatch()
	for _, id := range k.due() {
		keys := missingKeys(k.view.pods, k.tab, id)
		if len(keys) == 0 {
			delete(k.absent, id)
			continue
		}
		if !k.absent[id].covers(keys) || !k.tab.newest(id).Before(k.mir.changed) {
			// an allocation missing for less than the period, or one made
			// since the last marker: a new period
			k.absent[id] = absence{since: k.clock.Now(), keys: keys}
			continue
		}
		if k.keptByRuntime(id, keys) {
			continue
		}
		if b.full() {
			break // the rest at the next sweep, which is due at once
		}
		for _, key := range keys {
			k.addRelease(b, key, k.reclaimDone(k.tab, key, reasonAbsent))
		}
	}
	k.flush(b)
}

// Reasons an address is reclaimed without a release call.
const (
	reasonAbsent = "absent" // not in Kubernetes for the grace period, seen twice
)

// reclaimDone completes the delete of a reclaimed allocation's record:
// the address is free once the delete is durable; otherwise the pod keeps
// it and the sweep tries again later.
func (k *Keeper) reclaimDone(t *table, key allocKey, reason string) func(outcome, error) {
	a, _ := t.lookup(key)
	id := t.podOf(key)
	return func(o outcome, err error) {
		if o != durable {
			k.sweep.notBefore = k.clock.Now().Add(sweepRetryDelay)
			if o == unknown {
				t.unsure[key] = struct{}{}
			}
			k.log.Warn("releasing the address of a pod missing from Kubernetes failed; retrying later",
				"pod", id.String(), "key", key.String(), "ip", a.String(), "reason", reason, "error", err)
			return
		}
		k.released(t, key)
		if len(t.byPod[id]) == 0 {
			delete(k.absent, id)
			delete(k.young, id)
		}
		k.metrics.reclaimed.WithLabelValues(reason).Inc()
		k.metrics.released.WithLabelValues(reason).Inc()
		k.log.Info("released the address of a pod missing from Kubernetes", "pod", id.String(), "key", key.String(), "ip", a.String(), "reason", reason)
	}
}
