package controller

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contiv-ipam/agent/infra/health"
	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// loopStatus is what other goroutines (the health probe, REST) may read of
// the loop's state. The loop goroutine writes it; mu guards it.
type loopStatus struct {
	mu      sync.Mutex
	started bool
	fatal   error
	current *inFlight // the event being processed; nil between events
}

// inFlight is the event the loop is processing.
type inFlight struct {
	seq   uint64
	event string
	since time.Time
}

func (s *loopStatus) begin(seq uint64, event string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = &inFlight{seq: seq, event: event, since: at}
}

func (s *loopStatus) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = nil
}

func (s *loopStatus) setStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
}

func (s *loopStatus) setFatal(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fatal = err
}

// errLoopStuck: one event has been processing longer than stuckEventTimeout.
var errLoopStuck = errors.New("event loop stuck")

// health tells the loop's state at now: Error when it stopped (fatal error
// or Close) or when one event has been processing longer than stuckAfter;
// Init until the first DB resync; OK otherwise.
func (l *eventLoop) health(now time.Time, stuckAfter time.Duration) (health.State, error) {
	l.status.mu.Lock()
	started, fatal, cur := l.status.started, l.status.fatal, l.status.current
	l.status.mu.Unlock()
	switch {
	case fatal != nil:
		return health.Error, fatal
	case l.isClosed():
		return health.Error, fmt.Errorf("event loop stopped: %w", api.ErrClosedController)
	case cur != nil && now.Sub(cur.since) > stuckAfter:
		return health.Error, fmt.Errorf("%w: event %d (%s) processing for %s, more than stuckEventTimeout %s",
			errLoopStuck, cur.seq, cur.event, now.Sub(cur.since).Round(time.Millisecond), stuckAfter)
	case !started:
		return health.Init, nil
	}
	return health.OK, nil
}

// runnable returns why the loop cannot process a new event (nil if it can).
func (l *eventLoop) runnable() error {
	l.status.mu.Lock()
	fatal := l.status.fatal
	l.status.mu.Unlock()
	switch {
	case fatal != nil:
		return fmt.Errorf("event loop stopped by a fatal error (%v): %w", fatal, api.ErrClosedController)
	case l.isClosed():
		return fmt.Errorf("event loop stopped: %w", api.ErrClosedController)
	}
	return nil
}
