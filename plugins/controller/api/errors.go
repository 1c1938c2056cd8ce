package api

import (
	"errors"
	"fmt"
)

// Errors of PushEvent and PushFollowUp.
var (
	// ErrClosedController: the loop has stopped (closed or after a fatal
	// error), or is closing and gave up retrying a commit.
	ErrClosedController = errors.New("controller is closed")
	// ErrEventQueueFull: the queue is at its limit; try again later.
	ErrEventQueueFull = errors.New("event queue is full")
	// ErrBlockingFollowUp: a follow-up must not be blocking, since it
	// would wait for the event that pushed it.
	ErrBlockingFollowUp = errors.New("a follow-up event must not be blocking")
	// ErrTransactionFinished: PushFollowUp was called on the transaction
	// of an event whose handlers have all returned.
	ErrTransactionFinished = errors.New("the event's transaction is finished")
)

// FatalError stops the event loop and turns the agent's health red (so
// Kubernetes restarts it). Wrap the cause with NewFatalError.
type FatalError struct{ err error }

// NewFatalError wraps err.
func NewFatalError(err error) *FatalError { return &FatalError{err: err} }

func (e *FatalError) Error() string { return "fatal error: " + errString(e.err) }

// Unwrap returns the cause.
func (e *FatalError) Unwrap() error { return e.err }

// AbortEventError stops the processing of one event: the remaining handlers
// are not called and nothing of the event is committed (handlers already
// run are reverted for RevertOnFailure events). The loop goes on and no
// healing is scheduled.
type AbortEventError struct{ err error }

// NewAbortEventError wraps err.
func NewAbortEventError(err error) *AbortEventError { return &AbortEventError{err: err} }

func (e *AbortEventError) Error() string { return "event aborted: " + errString(e.err) }

// Unwrap returns the cause.
func (e *AbortEventError) Unwrap() error { return e.err }

// IsFatal reports whether err is or wraps a FatalError.
func IsFatal(err error) bool {
	var f *FatalError
	return errors.As(err, &f)
}

// IsAbort reports whether err is or wraps an AbortEventError.
func IsAbort(err error) bool {
	var a *AbortEventError
	return errors.As(err, &a)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return fmt.Sprint(err)
}
