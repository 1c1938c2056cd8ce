package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// queued is an event waiting in a queue.
type queued struct {
	ev         api.Event
	done       chan error // blocking events only
	isFollowUp bool
	followUpTo uint64
}

// observer is told about every processed event and the loop's state.
type observer interface {
	processed(rec *EventRecord, err error)
	stateChanged(started bool, fatal error)
}

// eventLoop processes every event on one goroutine.
type eventLoop struct {
	cfg      Config
	handlers []api.EventHandler
	sb       Southbound
	log      *slog.Logger
	obs      observer
	history  *history
	now      func() time.Time
	status   loopStatus // read by the health probe and REST

	queue   chan *queued
	mu      sync.Mutex // guards closed, closedC and the start of sends to queue
	closed  bool
	closedC chan struct{} // closed with closed: waiting senders give up
	// senders counts the pushes waiting for room in the queue; failPending
	// waits for them before it drains the queue.
	senders   sync.WaitGroup
	closing   chan struct{} // closed when Close begins: retries give up
	closeOnce sync.Once
	stopCh    chan struct{} // closed when the loop must return
	finished  chan struct{}

	// Owned by the loop goroutine.
	followUps   []*queued
	replay      []*queued // events that arrived before the first resync
	started     bool
	seq         uint64
	resyncCount int
	kubeState   api.KubeStateData
	desired     map[string]proto.Message
	healing     *time.Timer
	fatalErr    error
}

func newEventLoop(cfg Config, handlers []api.EventHandler, sb Southbound, log *slog.Logger, obs observer) *eventLoop {
	now := time.Now
	return &eventLoop{
		cfg: cfg, handlers: handlers, sb: sb, log: log, obs: obs, now: now,
		history:   newHistory(now(), cfg),
		queue:     make(chan *queued, cfg.EventQueueSize),
		closedC:   make(chan struct{}),
		closing:   make(chan struct{}),
		stopCh:    make(chan struct{}),
		finished:  make(chan struct{}),
		kubeState: api.KubeStateData{},
		desired:   map[string]proto.Message{},
	}
}

// PushEvent queues ev, or fails with ErrEventQueueFull when the queue is
// full; a blocking event is waited for. Handlers push follow-ups through
// their transaction instead (see transaction).
func (l *eventLoop) PushEvent(ev api.Event) error { return l.push(context.Background(), ev, false) }

// PushEventWait queues ev like PushEvent, but waits for room in a full
// queue until ctx ends or the loop closes.
func (l *eventLoop) PushEventWait(ctx context.Context, ev api.Event) error {
	if ctx == nil {
		return errors.New("push event: nil context")
	}
	return l.push(ctx, ev, true)
}

// push queues ev; only with wait does it wait (until ctx ends) for room.
func (l *eventLoop) push(ctx context.Context, ev api.Event, wait bool) error {
	if ev == nil {
		return errors.New("push event: nil event")
	}
	q := &queued{ev: ev}
	if ev.IsBlocking() {
		q.done = make(chan error, 1)
	}
	if err := l.enqueue(ctx, q, wait); err != nil {
		return err
	}
	if q.done == nil {
		return nil
	}
	return <-q.done
}

// enqueue sends q to the queue. A send that must wait registers with
// senders under mu, so that failPending, which sets closed under mu and
// then waits for senders, never leaves an event in a queue nobody drains.
func (l *eventLoop) enqueue(ctx context.Context, q *queued, wait bool) error {
	name := q.ev.GetName()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return fmt.Errorf("push %s: %w", name, api.ErrClosedController)
	}
	select {
	case l.queue <- q:
		l.mu.Unlock()
		return nil
	default:
	}
	if !wait {
		l.mu.Unlock()
		return fmt.Errorf("push %s: %w (%d events)", name, api.ErrEventQueueFull, cap(l.queue))
	}
	l.senders.Add(1)
	l.mu.Unlock()
	defer l.senders.Done()
	select {
	case l.queue <- q:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("push %s: gave up waiting for room in the event queue (%d events): %w", name, cap(l.queue), ctx.Err())
	case <-l.closedC:
		return fmt.Errorf("push %s: %w", name, api.ErrClosedController)
	}
}

// markClosed refuses every later push and wakes the waiting ones; it
// reports whether the loop was closed already.
func (l *eventLoop) markClosed() (already bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return true
	}
	l.closed = true
	close(l.closedC)
	return false
}

// isClosed tells whether the loop has stopped or is stopping.
func (l *eventLoop) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// start runs the loop goroutine.
func (l *eventLoop) start() { go l.run() }

// beginClose makes commit retries give up at once (they would delay
// Close); events are still processed. Safe to call more than once.
func (l *eventLoop) beginClose() {
	l.closeOnce.Do(func() { close(l.closing) })
}

// stop makes the loop return and fails every event still queued; it waits
// for the loop goroutine.
func (l *eventLoop) stop() {
	l.beginClose()
	if !l.markClosed() {
		close(l.stopCh)
	}
	<-l.finished
}

func (l *eventLoop) run() {
	defer close(l.finished)
	defer l.failPending()
	startup := time.NewTimer(l.cfg.StartupResyncDeadline)
	defer startup.Stop()
	l.healing = time.NewTimer(time.Hour)
	l.healing.Stop()
	periodic := l.periodicTicker()
	for l.fatalErr == nil {
		if l.stopRequested() {
			return
		}
		if q := l.nextPending(); q != nil {
			l.process(q)
			continue
		}
		select {
		case q := <-l.queue:
			l.receive(q)
		case <-startup.C:
			if !l.started {
				l.setFatal(fmt.Errorf("no DB resync within startupResyncDeadline %s", l.cfg.StartupResyncDeadline))
			}
		case <-l.healing.C:
			l.process(&queued{ev: &api.HealingResync{Type: api.AfterError, Error: errors.New("a previous event failed")}})
		case <-periodic:
			if l.started {
				l.process(&queued{ev: &api.HealingResync{Type: api.Periodic}})
			}
		case <-l.stopCh:
			return
		}
	}
}

// stopRequested tells whether stop was called, without waiting.
func (l *eventLoop) stopRequested() bool {
	select {
	case <-l.stopCh:
		return true
	default:
		return false
	}
}

func (l *eventLoop) periodicTicker() <-chan time.Time {
	if !l.cfg.EnablePeriodicHealing {
		return nil
	}
	t := time.NewTicker(l.cfg.PeriodicHealingInterval)
	go func() { <-l.finished; t.Stop() }()
	return t.C
}

// nextPending pops a follow-up, else an event replayed after startup.
func (l *eventLoop) nextPending() *queued {
	if len(l.followUps) > 0 {
		q := l.followUps[0]
		l.followUps = l.followUps[1:]
		return q
	}
	if l.started && len(l.replay) > 0 {
		q := l.replay[0]
		l.replay = l.replay[1:]
		return q
	}
	return nil
}

// receive processes q, or keeps it for later while the first DB resync
// has not come (Shutdown is never delayed).
func (l *eventLoop) receive(q *queued) {
	_, isResync := q.ev.(*api.DBResync)
	_, isShutdown := q.ev.(*api.Shutdown)
	if !l.started && !isResync && !isShutdown {
		l.log.Debug("event delayed until the first DB resync", "event", q.ev.String())
		l.replay = append(l.replay, q)
		return
	}
	l.process(q)
}

// failPending completes every event that will never be processed.
func (l *eventLoop) failPending() {
	l.markClosed()
	l.senders.Wait() // every waiting push has now queued or given up
	err := api.ErrClosedController
	if l.fatalErr != nil {
		err = fmt.Errorf("%w: event loop is aborting after a fatal error: %v", api.ErrClosedController, l.fatalErr)
	}
	pending := append(l.followUps, l.replay...)
	l.followUps, l.replay = nil, nil
	for {
		select {
		case q := <-l.queue:
			pending = append(pending, q)
			continue
		default:
		}
		break
	}
	for _, q := range pending {
		q.ev.Done(err)
		if q.done != nil {
			q.done <- err
		}
	}
	l.healing.Stop()
}

// setFatal stops the loop after the current event.
func (l *eventLoop) setFatal(err error) {
	if !api.IsFatal(err) {
		err = api.NewFatalError(err)
	}
	l.fatalErr = err
	l.status.setFatal(err)
	l.log.Error("event loop stopped by a fatal error", "error", err)
	l.obs.stateChanged(l.started, err)
}
