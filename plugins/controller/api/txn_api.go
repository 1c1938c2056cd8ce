package api

import "google.golang.org/protobuf/proto"

// KeyValuePairs are items of desired configuration by key.
type KeyValuePairs map[string]proto.Message

// ResyncOperations is what a handler can do in a resync transaction.
type ResyncOperations interface {
	// Put sets the desired value of key.
	Put(key string, value proto.Message)
	// Get returns the value put in this transaction, or nil.
	Get(key string) proto.Message
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
