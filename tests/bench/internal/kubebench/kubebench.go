// Package kubebench holds what the benchmarks that drive a real API
// server (tests/bench/nodecidr, tests/bench/capi) share: quiet library
// logs, objects created by several clients at once, and a list-and-watch
// that counts the objects that reached a state, listing again when the API
// server drops the watch (it does to watchers that fall behind on a
// loaded machine).
//
// Owner: a Follower belongs to the goroutine that calls its methods.
package kubebench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// QuietLogs drops the logs of the libraries (call it from TestMain before
// anything runs): controller-runtime prints a stack to stdout when no
// logger was set 30 s into the process (envtest logs through it), and
// klog writes to stderr; either can land inside a benchmark line, which
// the report reads.
func QuietLogs() {
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
}

// CreateAll calls create for every name with workers goroutines at once
// and returns every error, joined.
func CreateAll(ctx context.Context, names []string, workers int, create func(context.Context, string) error) error {
	next := make(chan string)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range workers {
		wg.Go(func() {
			for name := range next {
				if err := create(ctx, name); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, name := range names {
		next <- name
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// Follower counts the objects that reached a state. List lists them,
// returns the names of those that have reached it and every object's
// count, and a watch from the list's resource version. Reached tells the
// name of a watched object and whether it has reached the state; ok is
// false for what is not an object of the kind (the end of the watch, an
// error), after which the Follower lists again.
type Follower struct {
	List    func(ctx context.Context) (reached []string, listed int, w watch.Interface, err error)
	Reached func(obj runtime.Object) (name string, reached, ok bool)
	What    string // "claims Ready", for errors

	have    map[string]bool
	w       watch.Interface
	relists int
}

// Relist lists (see List), records what has reached the state and watches
// from there; it returns the number of objects listed.
func (f *Follower) Relist(ctx context.Context) (int, error) {
	f.Stop()
	f.relists++
	reached, listed, w, err := f.List(ctx)
	if f.have == nil {
		f.have = make(map[string]bool, listed)
	}
	for _, name := range reached {
		f.have[name] = true
	}
	f.w = w
	return listed, err
}

// Wait returns when n objects have reached the state; an error when
// timeout passes first or a list or watch fails.
func (f *Follower) Wait(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for len(f.have) < n {
		select {
		case ev, open := <-f.w.ResultChan():
			var name string
			var reached, ok bool
			if open {
				name, reached, ok = f.Reached(ev.Object)
			}
			if !ok {
				if _, err := f.Relist(ctx); err != nil {
					return fmt.Errorf("list and watch again (%s): %w", f.What, err)
				}
				continue
			}
			if reached {
				f.have[name] = true
			}
		case <-deadline.C:
			return fmt.Errorf("%d of %d %s after %s", len(f.have), n, f.What, timeout)
		}
	}
	return nil
}

// Len returns how many objects have reached the state.
func (f *Follower) Len() int { return len(f.have) }

// Relists returns the lists made, the first one included.
func (f *Follower) Relists() int { return f.relists }

// Stop ends the watch.
func (f *Follower) Stop() {
	if f.w != nil {
		f.w.Stop()
	}
}
