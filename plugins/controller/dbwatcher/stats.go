package dbwatcher

import "sync/atomic"

// Stats are the watcher's counters since New.
type Stats struct {
	// RemoteResyncs counts DBResync events from etcd pushed to the loop.
	RemoteResyncs int64
	// LocalResyncs counts DBResync events from the mirror pushed to the loop.
	LocalResyncs int64
	// Changes counts KubeStateChange events pushed to the loop.
	Changes int64
	// DecodeErrors counts keys skipped because they belong to no known
	// resource or their value does not decode (in resyncs and changes).
	DecodeErrors int64
	// DroppedStale counts watch events dropped because their revision was
	// already processed.
	DroppedStale int64
	// MirrorSkipped counts values left out of the mirror because they are
	// larger than kvdb.MaxValueLen (in resyncs and changes).
	MirrorSkipped int64
	// StoreReplacements counts the replacements of the remote store that
	// Remote reported (kvdb.ReplaceNotifier), each followed by a remote
	// resync.
	StoreReplacements int64
}

// counters are the live Stats, updated by the run goroutine.
type counters struct {
	remoteResyncs atomic.Int64
	localResyncs  atomic.Int64
	changes       atomic.Int64
	decodeErrors  atomic.Int64
	droppedStale  atomic.Int64
	mirrorSkipped atomic.Int64
	// storeReplacements is written by Remote's callback goroutine.
	storeReplacements atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		RemoteResyncs:     c.remoteResyncs.Load(),
		LocalResyncs:      c.localResyncs.Load(),
		Changes:           c.changes.Load(),
		DecodeErrors:      c.decodeErrors.Load(),
		DroppedStale:      c.droppedStale.Load(),
		MirrorSkipped:     c.mirrorSkipped.Load(),
		StoreReplacements: c.storeReplacements.Load(),
	}
}

// badValue counts a skipped key of resource ("" for no known resource).
func (s *syncer) badValue(resource string) {
	s.w.stats.decodeErrors.Add(1)
	if s.w.cfg.OnBadValue != nil {
		s.w.cfg.OnBadValue(resource)
	}
}
