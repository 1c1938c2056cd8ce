// Package controller is the spine of the agent: one event loop applies
// every event to the registered event handlers, in order, and commits the
// desired configuration they compute to a Southbound.
//
// Events come from the DB watcher (a DB resync at start and after every
// etcd reconnect, a Kubernetes state change per changed key), from other
// plugins (PushEvent) and from the loop itself (healing resyncs). The first
// processed event is always a DB resync: events pushed earlier wait and are
// replayed after it. Handlers are called in registration order, in reverse
// for Reverse updates. Events a handler pushes while it runs are follow-ups,
// processed before anything else in the queue.
//
// Errors: a FatalError stops the loop and turns the controller's health
// red; an AbortEventError stops one event (nothing of it is committed); any
// other error of a BestEffort update or of a resync schedules an after-error
// healing resync, and a failing healing resync is fatal.
//
// REST: GET /controller/event-history, POST /controller/resync,
// GET /controller/config. Metrics: contiv_controller_events_total,
// contiv_controller_event_processing_seconds, contiv_controller_event_queue_length.
// Config: controller.conf (see Config).
package controller
