// Package api is the contract between the controller's event loop and the
// plugins around it: events, event handlers, the transactions handlers fill
// with desired configuration, the Kubernetes state handed to resyncs, and
// the two special errors (FatalError, AbortEventError).
//
// Every event is processed by one goroutine, so handlers never run
// concurrently with each other. A resync hands every handler the whole
// Kubernetes state and an empty transaction: what the handlers put is the
// complete desired configuration. An update hands them a transaction that
// changes it key by key.
//
// Caller duties:
//
//  1. A handler pushes the events that must follow the current one with
//     the transaction's PushFollowUp, only while its Resync or Update runs,
//     and never a blocking one.
//  2. A handler never calls EventLoop.PushEvent with a blocking event: it
//     would wait for itself. PushEvent is for other goroutines.
//  3. Branch on errors with errors.Is (ErrClosedController,
//     ErrEventQueueFull, ErrBlockingFollowUp, ErrTransactionFinished) and
//     IsFatal / IsAbort, never on messages.
package api
