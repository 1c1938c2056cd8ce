package kvdb

import "context"

// KeyValue is one stored key with its value.
type KeyValue struct {
	// Key is the key, relative to the broker's prefix.
	Key string
	// Value is the stored value; a present key always has a non-nil Value
	// (an empty value is an empty, non-nil slice).
	Value []byte
	// Revision is the key's mod revision: the store revision of the write
	// that last changed it.
	Revision int64
}

// EventType tells whether a watch event is a put or a delete.
type EventType int

// Event types.
const (
	// EventPut: the key was created or overwritten.
	EventPut EventType = iota + 1
	// EventDelete: the key was deleted.
	EventDelete
)

// String returns "put" or "delete".
func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// WatchEvent is one change seen by a watch.
type WatchEvent struct {
	Type EventType
	// Key is the changed key, relative to the broker's prefix.
	Key string
	// Value is the new value; nil for EventDelete.
	Value []byte
	// PrevValue is the value before the change, nil if the key did not exist
	// (an existing empty value is an empty, non-nil slice).
	PrevValue []byte
	// Revision is the store revision of the change. The ops of one
	// transaction share a revision; different writes never do.
	Revision int64
}

// Broker reads and writes keys. Implementations are safe for concurrent use.
//
// Keys are non-empty strings of at most MaxKeyLen bytes; values are at most
// MaxValueLen bytes. An invalid key fails with an error wrapping
// ErrInvalidKey, a too large value with ErrValueTooLarge, both before
// anything is sent to the store. Every method fails with an error wrapping
// ErrClosed once the store is closed. Other errors (store unreachable,
// ctx done) are wrapped with the key they concern.
//
// Ownership: slices passed in are not retained after the call returns (the
// store copies what it keeps). Slices returned by Get and List belong to the
// caller. Slices in watch events are read-only: they may be shared with
// other watchers of the same store.
type Broker interface {
	// Put stores value under key, creating or overwriting it.
	Put(ctx context.Context, key string, value []byte) error

	// Get returns the key's value and mod revision. A missing key is
	// found=false with a nil error and a zero KeyValue.
	Get(ctx context.Context, key string) (kv KeyValue, found bool, err error)

	// List returns every key that starts with prefix ("" lists all keys),
	// sorted by key, and rev, the store revision of this snapshot.
	// Watch(ctx, prefix, rev+1) then delivers exactly the changes made after
	// the snapshot: no gap and no duplicate. An empty result is not an error.
	List(ctx context.Context, prefix string) (kvs []KeyValue, rev int64, err error)

	// Delete removes key; existed tells whether there was anything to remove.
	Delete(ctx context.Context, key string) (existed bool, err error)

	// Txn is an atomic compare-and-swap: if every cmp holds, all ops are
	// applied as one write (one revision) and succeeded is true; otherwise
	// nothing is applied and succeeded is false with a nil error. With no
	// cmps the ops are applied unconditionally; with no ops Txn only
	// evaluates the cmps. Ops must name distinct keys and there may be at
	// most MaxTxnOps cmps and MaxTxnOps ops, else the error wraps
	// ErrInvalidTxn.
	Txn(ctx context.Context, cmps []Cmp, ops []Op) (succeeded bool, err error)

	// Watch delivers, in revision order and exactly once, every change to
	// keys starting with prefix whose revision is >= fromRev. fromRev 0
	// means "from now": every change committed after Watch returns is
	// delivered. Use List's rev+1 to continue a snapshot without a gap. A
	// watch from a revision the store has not reached yet waits for it:
	// it delivers nothing until then, which is not a fault.
	//
	// Watch returns once the watch is established. The channel is closed
	// when ctx ends, when the store is closed, or when the watch breaks: its
	// start revision was compacted away (the error may also be returned at
	// once, wrapping ErrCompacted), the consumer fell too far behind, or
	// the store was replaced (see ReplaceNotifier). A watch never goes
	// silent instead of breaking: while the channel is open, every change
	// is delivered. When the channel closes while ctx is still live, the
	// consumer must List again and Watch from the new rev+1.
	Watch(ctx context.Context, prefix string, fromRev int64) (<-chan WatchEvent, error)
}

// Submitter is implemented by stores that queue their writes (bolt): it
// lets a single writer hand over writes without waiting for each, in its
// own order, and learn their outcomes as they come.
type Submitter interface {
	// Submit queues a transaction (see Broker.Txn) behind every write
	// queued before it and returns at once. It fails without queuing, and
	// without calling done, when the arguments are invalid, the store is
	// closed, ctx has ended, or the queue is full (wrapping ErrBusy).
	// Otherwise done is called exactly once, from a goroutine of the
	// store, with the outcome as Txn would return it: while the write is
	// still queued, the end of ctx withdraws it (done hears "not applied"
	// at once); once the store has taken it, done hears the commit's
	// outcome. done must not block.
	Submit(ctx context.Context, cmps []Cmp, ops []Op, done func(succeeded bool, err error)) error
}

// StoreReplaced describes a store found replaced behind its plugin: the
// endpoints now reach another store (etcd restored from an old snapshot,
// a wiped member, another cluster after maintenance). Revisions of the
// old store mean nothing in the new one, so a watch from an old revision
// would wait silently, or skip changes.
type StoreReplaced struct {
	// Reason is ReasonStoreID or ReasonRevisionBack.
	Reason string
	// OldID and NewID identify the two stores (etcd: cluster IDs in hex).
	OldID, NewID string
	// LastRevision is the highest revision the old store showed; Revision
	// the new store's, when the replacement was found.
	LastRevision, Revision int64
}

// Reasons of a StoreReplaced.
const (
	// ReasonStoreID: an answer carried another store ID (etcd: cluster
	// ID) than the earlier answers.
	ReasonStoreID = "store ID changed"
	// ReasonRevisionBack: an answer showed a revision lower than one shown
	// before the request was sent (the same cluster ID, another store:
	// a member started again on empty or restored data).
	ReasonRevisionBack = "revision went back"
)

// ReplaceNotifier is implemented by stores that can be replaced behind
// their plugin while the agent runs (etcd). The plugin checks the store's
// identity on the answers it gets (every health probe among them, so a
// replacement is found within one probe interval even when nothing else
// is asked), and when it finds the store replaced:
//  1. it ends every watch it serves (each channel closes: its consumer
//     lists again and watches from the new rev+1, as for any broken
//     watch), then
//  2. it calls every OnStoreReplaced callback, so that consumers without
//     a watch resync too.
//
// A replacement is found by an answer whose store ID differs, or whose
// revision is lower than one seen before its request was sent. A new
// store with the same ID whose revision has already passed the last one
// seen is not told apart from the old one.
type ReplaceNotifier interface {
	// OnStoreReplaced registers fn, called once per replacement found, on
	// the plugin's goroutine, after the old store's watches were ended.
	// fn must not block: hand the resync to your own goroutine.
	OnStoreReplaced(fn func(StoreReplaced))
}

// Store is a key-value store plugin: a root Broker (no prefix) plus
// prefixed views and connection callbacks.
type Store interface {
	Broker

	// NewBroker returns a view that prepends prefix to every key it is
	// given and strips it from every key it returns (see WithPrefix).
	NewBroker(prefix string) Broker

	// OnConnect runs fn now if the store is connected, else queues it until
	// the (delayed) first connection succeeds. Each fn runs once; an error
	// it returns is logged by the store.
	OnConnect(fn func() error)

	// OnReconnect registers fn to be called each time the store's health
	// probe succeeds after having failed: data may have changed while the
	// agent was cut off, so fn should resync (List and Watch again). A
	// store that cannot lose its connection never calls fn.
	OnReconnect(fn func())

	// String returns the plugin's name.
	String() string
}
