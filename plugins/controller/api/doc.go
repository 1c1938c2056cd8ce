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
package api
