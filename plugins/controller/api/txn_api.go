package api

import "google.golang.org/protobuf/proto"

// KeyValuePairs are items of desired configuration by key.
type KeyValuePairs map[string]proto.Message

// FollowUpPusher lets a handler push events that follow the one it handles.
type FollowUpPusher interface {
	// PushFollowUp queues ev to be processed right after the current event,
	// before every event queued by PushEvent; follow-ups run in the order
	// they were pushed. The event history records ev with IsFollowUp set
	// and FollowUpTo naming the current event. ev must not be blocking.
	// Call it only while the Resync or Update that received the
	// transaction runs. Errors: ErrBlockingFollowUp (ev is blocking),
	// ErrClosedController (the loop stopped: closed or after a fatal
	// error), ErrTransactionFinished (the event is over).
	PushFollowUp(ev Event) error
}

// ResyncOperations is what a handler can do in a resync transaction.
type ResyncOperations interface {
	// Put sets the desired value of key.
	Put(key string, value proto.Message)
	// Get returns the value put in this transaction, or nil.
	Get(key string) proto.Message
	FollowUpPusher
}

// UpdateOperations adds deletion for update transactions.
type UpdateOperations interface {
	ResyncOperations
	// Delete removes key from the desired configuration.
	Delete(key string)
}

// PutAll puts every pair.
func PutAll(txn ResyncOperations, values KeyValuePairs) {
	for k, v := range values {
		txn.Put(k, v)
	}
}

// DeleteAll deletes every key of values.
func DeleteAll(txn UpdateOperations, values KeyValuePairs) {
	for k := range values {
		txn.Delete(k)
	}
}
