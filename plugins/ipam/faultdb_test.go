package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// fault is what faultDB does with one write. Each fails the way a real
// store fails under kvdb's "Write outcomes" contract: a store that says
// "not applied" never applies, and one that says "unknown" resolves it
// for a read ordered after the write.
type fault int

const (
	// pass applies the write and returns its result.
	pass fault = iota
	// failBefore applies nothing and says so (a full disk, a write
	// withdrawn from the queue).
	failBefore
	// failAfter applies the write and reports an unknown outcome (a
	// commit that outlived its caller's context).
	failAfter
	// lostUnknown applies nothing and reports an unknown outcome (a
	// request whose reply was lost, and which never landed).
	lostUnknown
	// lateApply reports an unknown outcome at once and applies the write
	// a moment later (or when the test lets it: holdLate); a read is
	// ordered after it, as bolt's reads are.
	lateApply
	// stall holds the store for stallFor before it applies the write and
	// reports it applied (a stalled disk): the writes queued behind it
	// wait, and those whose context ends meanwhile are withdrawn.
	stall
)

// stallFor is how long a stall fault holds the store.
const stallFor = 80 * time.Millisecond

// errInjected is the error of a write failed by faultDB.
var errInjected = errors.New("injected store failure")

// errInjectedUnknown is the error of a write of unknown outcome.
var errInjectedUnknown = fmt.Errorf("%w: %w", kvdb.ErrUnknownOutcome, errInjected)

// faultDB wraps a bolt store: every write (Put, Delete, Txn, Submit) is
// shown to decide, which may block (to pin an interleaving: the writes
// submitted after it wait in order, as behind bolt's stalled committer)
// and picks its fault. Reads pass through unless failReads is set, after
// the late writes have landed.
type faultDB struct {
	base interface {
		kvdb.Broker
		kvdb.Submitter
	}
	mu        sync.Mutex
	decide    func(ops []kvdb.Op) fault
	failReads bool
	failGet   func(key string) bool // fails one Get of key when it returns true
	listErr   error                 // List fails with it when set

	queue   chan *faultJob // Submits under a decide policy, in order
	late    lateWrites     // late writes not applied yet
	applied atomic.Int64   // late writes applied
}

var (
	_ kvdb.Broker    = (*faultDB)(nil)
	_ kvdb.Submitter = (*faultDB)(nil)
)

// faultJob is one Submit waiting for its turn.
type faultJob struct {
	state   atomic.Int32 // 0 queued, 1 taken, 2 withdrawn
	ops     []kvdb.Op
	done    func(bool, error)
	ctxErr  func() error
	unwatch func() bool
}

func newFaultDB(db interface {
	kvdb.Broker
	kvdb.Submitter
}) *faultDB {
	f := &faultDB{base: db, queue: make(chan *faultJob, 4096)}
	go f.run()
	return f
}

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

// write runs apply (the write, on the base store) under fault what.
func (f *faultDB) write(what fault, apply func() error) error {
	switch what {
	case failBefore:
		return errInjected
	case failAfter:
		if err := apply(); err != nil {
			return err
		}
		return errInjectedUnknown
	case lostUnknown:
		return errInjectedUnknown
	case lateApply:
		f.late.Add(1)
		go func() {
			defer f.late.Done()
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			if apply() == nil {
				f.applied.Add(1)
			}
		}()
		return errInjectedUnknown
	case stall:
		time.Sleep(stallFor)
	}
	return apply()
}

// faultOf is the fault of a write under the current policy.
func (f *faultDB) faultOf(ops []kvdb.Op) fault {
	if decide, _ := f.policy(); decide != nil {
		return decide(ops)
	}
	return pass
}

func (f *faultDB) Put(ctx context.Context, key string, value []byte) error {
	return f.write(f.faultOf([]kvdb.Op{kvdb.PutOp(key, value)}), func() error {
		return f.base.Put(context.Background(), key, value)
	})
}

func (f *faultDB) Delete(ctx context.Context, key string) (bool, error) {
	var existed atomic.Bool // a late apply sets it after Delete returned
	err := f.write(f.faultOf([]kvdb.Op{kvdb.DeleteOp(key)}), func() error {
		e, err := f.base.Delete(context.Background(), key)
		existed.Store(e)
		return err
	})
	return existed.Load(), err
}

func (f *faultDB) Txn(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	var ok atomic.Bool // a late apply sets it after Txn returned
	err := f.write(f.faultOf(ops), func() error {
		o, e := f.base.Txn(context.Background(), cmps, ops)
		ok.Store(o)
		return e
	})
	return err == nil && ok.Load(), err
}

// Submit implements kvdb.Submitter: without a policy, bolt's own queue;
// with one, faultDB's queue, whose worker shows each write to decide in
// order (a write decide holds, holds the ones behind it). A write whose
// ctx ends while it waits is withdrawn: not applied.
func (f *faultDB) Submit(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op, done func(bool, error)) error {
	if decide, _ := f.policy(); decide == nil {
		return f.base.Submit(ctx, cmps, ops, done)
	}
	if len(cmps) > 0 {
		return errors.New("faultDB: Submit with compares is not supported")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not applied: %w", err)
	}
	j := &faultJob{ops: ops, done: done, ctxErr: ctx.Err}
	j.unwatch = context.AfterFunc(ctx, func() {
		if j.state.CompareAndSwap(0, 2) {
			done(false, fmt.Errorf("not applied: withdrawn: %w", ctx.Err()))
		}
	})
	f.queue <- j
	return nil
}

// run is the worker of faultDB's queue.
func (f *faultDB) run() {
	for j := range f.queue {
		if !j.state.CompareAndSwap(0, 1) {
			continue // withdrawn
		}
		j.unwatch()
		var ok atomic.Bool // a late apply sets it after done
		err := f.write(f.faultOf(j.ops), func() error {
			o, e := f.base.Txn(context.Background(), nil, j.ops)
			ok.Store(o)
			return e
		})
		j.done(err == nil && ok.Load(), err)
	}
}

// setFailGet makes a Get of key fail whenever fn(key) returns true (nil:
// never).
func (f *faultDB) setFailGet(fn func(key string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failGet = fn
}

// Get reads key after the late writes have landed (a read ordered after
// them).
func (f *faultDB) Get(ctx context.Context, key string) (kvdb.KeyValue, bool, error) {
	f.mu.Lock()
	failGet := f.failGet
	f.mu.Unlock()
	if _, fail := f.policy(); fail || (failGet != nil && failGet(key)) {
		return kvdb.KeyValue{}, false, errInjected
	}
	f.late.Wait()
	return f.base.Get(ctx, key)
}

// setListErr makes List fail with err (nil: work again).
func (f *faultDB) setListErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listErr = err
}

func (f *faultDB) List(ctx context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	if _, fail := f.policy(); fail {
		return nil, 0, errInjected
	}
	f.mu.Lock()
	err := f.listErr
	f.mu.Unlock()
	if err != nil {
		return nil, 0, err
	}
	f.late.Wait()
	return f.base.List(ctx, prefix)
}

func (f *faultDB) Watch(ctx context.Context, prefix string, fromRev int64) (<-chan kvdb.WatchEvent, error) {
	return f.base.Watch(ctx, prefix, fromRev)
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

// lateWrites counts the late writes not applied yet; wait returns once
// none is left. Unlike a WaitGroup, a write may be added while another
// goroutine waits (the keeper reads back off its goroutine while the
// store's worker starts late writes).
type lateWrites struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0; nil while n is 0
}

func (l *lateWrites) Add(int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		l.zero = make(chan struct{})
	}
	l.n++
}

func (l *lateWrites) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n--; l.n == 0 {
		close(l.zero)
		l.zero = nil
	}
}

// Wait returns once every late write started before it has landed (and
// any started meanwhile).
func (l *lateWrites) Wait() {
	l.mu.Lock()
	zero := l.zero
	l.mu.Unlock()
	if zero != nil {
		<-zero
	}
}
