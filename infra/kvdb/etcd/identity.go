package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

var _ kvdb.ReplaceNotifier = (*Plugin)(nil)

// errReplaced ends the watches of a store found replaced.
var errReplaced = errors.New("the etcd store behind the endpoints was replaced")

// identity is what the plugin knows of the store behind its endpoints:
// its cluster ID and the highest revision its answers have shown, and the
// watches started on it. Every request that checks its answer marks the
// identity before it is sent and checks the answer's header afterwards;
// the state is guarded by mu, written only by mark's and observe's
// callers through these methods.
type identity struct {
	mu        sync.Mutex
	clusterID uint64 // 0 until the first answer
	rev       int64  // the highest revision a checked answer showed
	// epoch counts the replacements found; a request marked in an earlier
	// epoch was sent to the store before, and its answer proves nothing.
	epoch   uint64
	watches map[*watchEntry]struct{} // watches started in the current epoch
	onFound []func(kvdb.StoreReplaced)
}

// mark is the identity as it was when a request was sent.
type mark struct {
	epoch uint64
	rev   int64
}

// watchEntry is a watch the identity ends when the store is replaced.
type watchEntry struct {
	cancel context.CancelCauseFunc
}

func (id *identity) mark() mark {
	id.mu.Lock()
	defer id.mu.Unlock()
	return mark{epoch: id.epoch, rev: id.rev}
}

// observe checks the header of an answer to a request sent at m. etcd
// serves a linearizable request at a revision at least as high as that of
// every answer received before the request was sent, and every answer
// carries the cluster's ID: a lower revision, or another cluster ID, comes
// from another store. Then the identity takes the new store's, every
// watch of the old one is ended, and the change is returned (ok true).
// checkRev is false for answers that are not linearizable (watches: a
// member may serve them from a state a little behind).
func (id *identity) observe(m mark, h *etcdserverpb.ResponseHeader, checkRev bool) (kvdb.StoreReplaced, bool) {
	if h == nil || h.ClusterId == 0 {
		return kvdb.StoreReplaced{}, false
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if m.epoch != id.epoch {
		return kvdb.StoreReplaced{}, false // sent before the last replacement was found
	}
	var reason string
	switch {
	case id.clusterID == 0:
		id.clusterID = h.ClusterId
	case h.ClusterId != id.clusterID:
		reason = kvdb.ReasonStoreID
	case checkRev && h.Revision < m.rev:
		reason = kvdb.ReasonRevisionBack
	}
	if reason == "" {
		if checkRev {
			id.rev = max(id.rev, h.Revision)
		}
		return kvdb.StoreReplaced{}, false
	}
	r := kvdb.StoreReplaced{Reason: reason, OldID: clusterHex(id.clusterID), NewID: clusterHex(h.ClusterId),
		LastRevision: id.rev, Revision: h.Revision}
	id.clusterID, id.rev = h.ClusterId, h.Revision
	id.epoch++
	for w := range id.watches {
		w.cancel(errReplaced)
	}
	clear(id.watches)
	return r, true
}

// addWatch registers a watch of the current epoch and returns its mark;
// the watch ends (cancel with errReplaced) when a replacement is found.
func (id *identity) addWatch(cancel context.CancelCauseFunc) (*watchEntry, mark) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.watches == nil {
		id.watches = map[*watchEntry]struct{}{}
	}
	w := &watchEntry{cancel: cancel}
	id.watches[w] = struct{}{}
	return w, mark{epoch: id.epoch, rev: id.rev}
}

// removeWatch forgets an ended watch.
func (id *identity) removeWatch(w *watchEntry) {
	id.mu.Lock()
	defer id.mu.Unlock()
	delete(id.watches, w)
}

func (id *identity) callbacks() []func(kvdb.StoreReplaced) {
	id.mu.Lock()
	defer id.mu.Unlock()
	return slices.Clone(id.onFound)
}

func clusterHex(id uint64) string { return fmt.Sprintf("%x", id) }

// OnStoreReplaced implements kvdb.ReplaceNotifier: fn is called on the
// monitor goroutine (AfterInit to Close) after every watch of the old
// store was ended, once per replacement found.
func (p *Plugin) OnStoreReplaced(fn func(kvdb.StoreReplaced)) {
	p.ident.mu.Lock()
	defer p.ident.mu.Unlock()
	p.ident.onFound = append(p.ident.onFound, fn)
}

// answered checks the header of an answer to a request sent at m (see
// identity.observe); a replacement is logged and queued for the monitor,
// which runs the OnStoreReplaced callbacks.
func (p *Plugin) answered(m mark, h *etcdserverpb.ResponseHeader, checkRev bool) {
	r, found := p.ident.observe(m, h, checkRev)
	if !found {
		return
	}
	p.Log.Warn("etcd store replaced: every watch was ended, its consumers list again",
		"reason", r.Reason, "old-cluster-id", r.OldID, "cluster-id", r.NewID,
		"last-revision", r.LastRevision, "revision", r.Revision, "endpoints", p.cfg.Endpoints)
	select {
	case p.replaced <- r:
	default:
		// The queue is full of replacements not reported yet: their
		// callbacks run after this one was found, which is all a consumer
		// needs (it lists the store as it is then).
	}
}

// reportReplaced runs the OnStoreReplaced callbacks for r.
func (p *Plugin) reportReplaced(r kvdb.StoreReplaced) {
	for _, fn := range p.ident.callbacks() {
		fn(r)
	}
}
