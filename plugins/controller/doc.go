// Package controller is the spine of the agent: one event loop applies
// every event to the registered event handlers, in order, and commits the
// desired configuration they compute to a Southbound.
//
// Events come from the DB watcher (a DB resync at start and after every
// etcd reconnect, a Kubernetes state change per changed key), from other
// plugins (PushEvent), from handlers (follow-ups) and from the loop itself
// (healing resyncs). The first processed event is always a DB resync:
// events pushed earlier wait and are replayed after it. Handlers are
// called in registration order, in reverse for Reverse updates.
//
// Caller duties, in order:
//
//  1. Build the handlers with a LoopRef (or any api.EventLoop) if they
//     push events from their own goroutines, and the controller with
//     UseLoopRef(ref) and UseHandlers(h...) in processing order.
//  2. Push events from goroutines other than the loop with PushEvent. A
//     blocking push waits for the event's outcome. PushEvent fails with
//     ErrEventQueueFull when eventQueueSize events wait; PushEventWait
//     waits for room instead, until its context ends or the loop closes
//     (the DB watcher uses it, so that no Kubernetes change is dropped).
//  3. Inside Resync and Update, push the events that must follow the
//     current one with txn.PushFollowUp, never with PushEvent: a follow-up
//     runs right after the current event, before everything queued, in
//     push order, and the event history records it with IsFollowUp and
//     FollowUpTo. A follow-up must not be blocking (ErrBlockingFollowUp);
//     after a fatal error, or once Close has stopped the loop, it fails
//     with ErrClosedController; a transaction kept past its event fails
//     with ErrTransactionFinished.
//  4. Never call PushEvent with a blocking event from a handler (Resync,
//     Update or Revert): the push waits for the loop, which waits for the
//     handler, and the agent hangs. Nothing detects it. A non-blocking
//     PushEvent from a handler is allowed but is an ordinary event that
//     waits behind the queue.
//  5. Close the controller (the agent does): commit retries give up at
//     once (the event fails with the commit error and
//     ErrClosedController), handlers see a Shutdown event, the loop stops
//     and every event still queued fails with ErrClosedController.
//
// Health: the controller registers its loop with the health plugin for
// liveness (health.LivenessReporter): init until the first DB resync, ok
// after, error once a fatal error or Close stopped the loop, and error
// while one event has been processing longer than stuckEventTimeout. So a
// dead or stuck loop fails /liveness and /readiness; an etcd outage fails
// only /readiness (the etcd plugin's own health). POST /controller/resync
// answers 503 when the loop has stopped (RequestResync wraps
// api.ErrClosedController).
//
// Errors: a FatalError stops the loop and turns the controller's health
// red; an AbortEventError stops one event (nothing of it is committed); any
// other error of a BestEffort update or of a resync schedules an after-error
// healing resync, and a failing healing resync is fatal. A failed update
// commit is retried (enableRetry, delayRetry, maxRetryAttempts) on a timer
// that Close interrupts.
//
// State: the loop goroutine owns the desired configuration, the Kubernetes
// state, the follow-up and replay lists, the sequence number and the
// healing timer; it publishes what the probe and REST read (started, the
// fatal error, the event in flight) in eventLoop.status, under its own
// mutex; eventLoop.mu guards only the closed flag and the start of
// sends to the queue (a PushEventWait waiting for room registers in
// eventLoop.senders, which the loop waits for before it fails what is left
// in the queue). A transaction's follow-ups are guarded by its own mutex until the
// loop takes them when the event ends. The history has its own lock (REST
// reads it); adding a record is amortised O(1), and a REST read copies at
// most its limit of records. The plugin owns the event-history read
// tokens (historyReads), taken and given back by each request.
//
// REST: GET /controller/event-history, POST /controller/resync,
// GET /controller/config. Metrics: contiv_controller_events_total,
// contiv_controller_event_processing_seconds, contiv_controller_event_queue_length,
// contiv_controller_kube_state_bad_values_total.
// Config: controller.conf (see Config).
package controller
