package ipam_test

import (
	"context"
	"errors"
	"sync"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// fault is what faultDB does with one write.
type fault int

const (
	// pass applies the write and returns its result.
	pass fault = iota
	// failBefore returns errInjected without applying anything.
	failBefore
	// failAfter applies the write and then returns a timeout: the caller
	// cannot know whether it landed (a write of unknown outcome).
	failAfter
)

// errInjected is the error of a write failed by faultDB.
var errInjected = errors.New("injected store failure")

// faultDB wraps a broker: every write (Put, Delete, Txn) is shown to
// decide, which may block (to pin an interleaving) and picks its fault.
// Reads pass through unless failReads is set.
type faultDB struct {
	kvdb.Broker
	mu        sync.Mutex
	decide    func(ops []kvdb.Op) fault
	failReads bool
	failGet   func(key string) bool // fails one Get of key when it returns true
}

var _ kvdb.Broker = (*faultDB)(nil)

func newFaultDB(db kvdb.Broker) *faultDB { return &faultDB{Broker: db} }

// setDecide replaces the fault policy; nil passes every write.
func (f *faultDB) setDecide(fn func(ops []kvdb.Op) fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decide = fn
}

// setFailReads makes Get and List fail (or work again).
func (f *faultDB) setFailReads(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failReads = on
}

func (f *faultDB) policy() (func([]kvdb.Op) fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.decide, f.failReads
}

// write runs apply under the policy for ops.
func (f *faultDB) write(ops []kvdb.Op, apply func() error) error {
	decide, _ := f.policy()
	what := pass
	if decide != nil {
		what = decide(ops)
	}
	switch what {
	case failBefore:
		return errInjected
	case failAfter:
		if err := apply(); err != nil {
			return err
		}
		return context.DeadlineExceeded
	}
	return apply()
}

func (f *faultDB) Put(ctx context.Context, key string, value []byte) error {
	return f.write([]kvdb.Op{kvdb.PutOp(key, value)}, func() error { return f.Broker.Put(ctx, key, value) })
}

func (f *faultDB) Delete(ctx context.Context, key string) (existed bool, err error) {
	err = f.write([]kvdb.Op{kvdb.DeleteOp(key)}, func() error {
		var e error
		existed, e = f.Broker.Delete(ctx, key)
		return e
	})
	return existed, err
}

func (f *faultDB) Txn(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (ok bool, err error) {
	err = f.write(ops, func() error {
		var e error
		ok, e = f.Broker.Txn(ctx, cmps, ops)
		return e
	})
	return ok, err
}

// setFailGet makes a Get of key fail whenever fn(key) returns true (nil:
// never).
func (f *faultDB) setFailGet(fn func(key string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failGet = fn
}

func (f *faultDB) Get(ctx context.Context, key string) (kvdb.KeyValue, bool, error) {
	f.mu.Lock()
	failGet := f.failGet
	f.mu.Unlock()
	if _, fail := f.policy(); fail || (failGet != nil && failGet(key)) {
		return kvdb.KeyValue{}, false, errInjected
	}
	return f.Broker.Get(ctx, key)
}

func (f *faultDB) List(ctx context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	if _, fail := f.policy(); fail {
		return nil, 0, errInjected
	}
	return f.Broker.List(ctx, prefix)
}

// gate holds the first write that touches key until the test opens it.
type gate struct {
	key     string
	entered chan []kvdb.Op // receives the held write's ops
	open    chan fault     // the test sends the held write's fault
	once    sync.Once
}

func newGate(key string) *gate {
	return &gate{key: key, entered: make(chan []kvdb.Op, 1), open: make(chan fault, 1)}
}

// decide is a faultDB policy: the first write touching g.key waits for
// the test, every other write passes.
func (g *gate) decide(ops []kvdb.Op) fault {
	if !touches(ops, g.key) {
		return pass
	}
	held := false
	g.once.Do(func() { held = true })
	if !held {
		return pass
	}
	g.entered <- ops
	return <-g.open
}

func touches(ops []kvdb.Op, key string) bool {
	for _, op := range ops {
		if op.Key == key {
			return true
		}
	}
	return false
}
