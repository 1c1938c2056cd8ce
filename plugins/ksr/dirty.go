package ksr

import "sync"

// dirtyKey names one object that changed: the index of its resource and
// its informer store key ("name" or "namespace/name").
type dirtyKey struct {
	res      int
	storeKey string
}

// dirtySet collects the objects the informers saw change since the loop
// last took them. Informer handlers add (any goroutine); the loop takes.
// Adding a key that is already in the set coalesces: the loop reads the
// object's latest state from the store when it takes the key, so many
// updates of one object cost at most one write.
type dirtySet struct {
	mu     sync.Mutex
	keys   map[dirtyKey]struct{}
	signal chan struct{} // capacity 1: "the set is not empty"
}

func newDirtySet() *dirtySet {
	return &dirtySet{keys: make(map[dirtyKey]struct{}), signal: make(chan struct{}, 1)}
}

// add marks one object changed and wakes the loop.
func (d *dirtySet) add(k dirtyKey) {
	d.mu.Lock()
	d.keys[k] = struct{}{}
	d.mu.Unlock()
	select {
	case d.signal <- struct{}{}:
	default:
	}
}

// take returns the marked objects and empties the set.
func (d *dirtySet) take() map[dirtyKey]struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := d.keys
	d.keys = make(map[dirtyKey]struct{})
	return keys
}

// len is the number of marked objects.
func (d *dirtySet) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.keys)
}
