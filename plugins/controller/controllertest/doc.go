// Package controllertest holds test doubles for code written against the
// controller's API (package api): Txn, a transaction that records what an
// event handler puts, deletes and pushes as follow-ups, so that a test can
// call a handler's Resync or Update directly, without an event loop.
//
// Caller duties:
//
//  1. pass a Txn (never nil) wherever a handler expects
//     api.ResyncOperations or api.UpdateOperations;
//  2. set OnFollowUp before the first call if the test's fakes already
//     record pushed events elsewhere, or to make follow-ups fail;
//  3. read what the handler did with Values and FollowUps.
//
// Txn checks the contract the real loop enforces on follow-ups (not nil,
// not blocking); it does not order or process them.
//
// State: a Txn is safe for concurrent use; its own mutex guards what it
// records.
package controllertest
