package api

import (
	"fmt"
)

// EventMethodType tells how the loop applies an event.
type EventMethodType int

const (
	// FullResync rebuilds the whole desired configuration from the handlers
	// and makes the southbound match it.
	FullResync EventMethodType = iota
	// DownstreamResync calls no handler: the controller re-applies the
	// desired configuration it already has to the southbound.
	DownstreamResync
	// UpstreamResync rebuilds the desired configuration from the handlers
	// (after a change of something they derive it from).
	UpstreamResync
	// Update changes the desired configuration key by key.
	Update
)

// String names the method.
func (m EventMethodType) String() string {
	switch m {
	case FullResync:
		return "FullResync"
	case DownstreamResync:
		return "DownstreamResync"
	case UpstreamResync:
		return "UpstreamResync"
	case Update:
		return "Update"
	}
	return fmt.Sprintf("EventMethodType(%d)", int(m))
}

// IsResync reports whether the method is one of the resyncs.
func (m EventMethodType) IsResync() bool { return m != Update }

// UpdateTransactionType tells what happens when an update fails part way.
type UpdateTransactionType int

const (
	// BestEffort keeps what succeeded; a failure schedules a healing resync.
	BestEffort UpdateTransactionType = iota
	// BestEffortIgnoreErrors keeps what succeeded and never heals.
	BestEffortIgnoreErrors
	// RevertOnFailure undoes the event: the handlers that ran before the
	// failing one are reverted in reverse order and nothing is committed.
	RevertOnFailure
)

// String names the transaction type.
func (t UpdateTransactionType) String() string {
	switch t {
	case BestEffort:
		return "BestEffort"
	case BestEffortIgnoreErrors:
		return "BestEffortIgnoreErrors"
	case RevertOnFailure:
		return "RevertOnFailure"
	}
	return fmt.Sprintf("UpdateTransactionType(%d)", int(t))
}

// UpdateDirectionType is the order in which handlers see an update.
type UpdateDirectionType int

const (
	// Forward calls handlers in registration order (things are added).
	Forward UpdateDirectionType = iota
	// Reverse calls handlers in reverse order (things are removed).
	Reverse
)

// String names the direction.
func (d UpdateDirectionType) String() string {
	if d == Reverse {
		return "Reverse"
	}
	return "Forward"
}

// Event is anything the loop processes.
type Event interface {
	// GetName is a short constant name of the event type ("DB Resync").
	GetName() string
	// String describes this event instance.
	String() string
	// Method tells how the event is applied.
	Method() EventMethodType
	// IsBlocking events make PushEvent wait until they are processed and
	// return the processing error.
	IsBlocking() bool
	// Done is called once with the outcome after processing.
	Done(error)
}

// UpdateEvent is an Event with Method Update.
type UpdateEvent interface {
	Event
	TransactionType() UpdateTransactionType
	Direction() UpdateDirectionType
}

// EventLoop accepts events from goroutines other than the loop's.
type EventLoop interface {
	// PushEvent queues the event behind every event already queued. For a
	// blocking event it waits until the event is processed and returns its
	// outcome. Errors: ErrEventQueueFull, ErrClosedController.
	//
	// A handler must not call PushEvent with a blocking event from Resync,
	// Update or Revert: the push would wait for the loop, which waits for
	// the handler, and the agent would hang. A handler that wants an event
	// processed after the current one pushes it with the transaction's
	// PushFollowUp; a non-blocking event it gives to PushEvent is not a
	// follow-up and waits behind the queue.
	PushEvent(event Event) error
}

// EventHandler is a plugin that reacts to events.
type EventHandler interface {
	// String names the handler (in logs and the event history).
	String() string
	// HandlesEvent filters the events the handler is called for.
	HandlesEvent(event Event) bool
	// Resync puts the handler's whole desired configuration into txn.
	// resyncCount is 1 for the first resync the loop processes. Events
	// that must follow go to txn.PushFollowUp.
	Resync(event Event, kubeStateData KubeStateData, resyncCount int, txn ResyncOperations) error
	// Update applies one change; changeDescription is recorded in the event
	// history ("" when nothing changed). Events that must follow go to
	// txn.PushFollowUp.
	Update(event Event, txn UpdateOperations) (changeDescription string, err error)
	// Revert undoes what Update did for a RevertOnFailure event that failed
	// in a later handler or at commit.
	Revert(event Event) error
}
