package ksr

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// absence remembers since when each Kubernetes Node has been gone. The
// node informer's handlers write it (any replica, leader or not, so that
// a replica that takes over knows how long a node has been gone); the
// loop reads it.
type absence struct {
	mu    sync.Mutex
	since map[string]time.Time
}

func newAbsence() *absence { return &absence{since: make(map[string]time.Time)} }

// gone records that node name was deleted at t, unless it was already.
func (a *absence) gone(name string, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.since[name]; !ok {
		a.since[name] = t
	}
}

// back forgets node name: it exists (again).
func (a *absence) back(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.since, name)
}

// mark returns since when name has been gone, recording now if nothing
// was recorded (a node that was already gone when this replica started
// counts from the first time it is seen gone: the grace period can only
// grow, never shrink).
func (a *absence) mark(name string, now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.since[name]
	if !ok {
		a.since[name] = now
		return now
	}
	return t
}

// keep forgets every name not in names (nodes that no ID names any more).
func (a *absence) keep(names map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for n := range a.since {
		if !names[n] {
			delete(a.since, n)
		}
	}
}

// PendingRelease is a node ID whose Node is gone from the API: it will be
// freed once the Node has been gone for the grace period (Due), or, if it
// is past due, at the first check after its agent has gone (Blocked).
type PendingRelease struct {
	ID        uint32    `json:"id"`
	Node      string    `json:"node"`
	GoneSince time.Time `json:"goneSince"`
	Due       time.Time `json:"due"`
	// Blocked says why a past-due ID was not freed; "" before Due.
	Blocked string `json:"blocked,omitempty"`
}

// blockedReason is PendingRelease.Blocked of an ID whose delete was
// refused.
const blockedReason = "its agent is present, its record changed, or this replica no longer leads"

// releaser frees the node IDs of Kubernetes Nodes gone for longer than
// the grace period. It is used by the loop goroutine only.
type releaser struct {
	db      kvdb.Broker // etcd, full keys
	nodes   cache.Store // the node informer's store
	absence *absence
	grace   time.Duration
	clock   clock.Clock
	metrics *ksrMetrics
	log     *slog.Logger
}

// idRecord is one allocatedIDs/ record.
type idRecord struct {
	id   uint32
	node string
	key  string // full etcd key
	rev  int64  // mod revision
}

// check frees every ID whose node has been gone for the grace period and
// returns the IDs still waiting, earliest due first (the blocked ones,
// past due, first).
func (r *releaser) check(ctx context.Context, fence kvdb.Cmp) ([]PendingRelease, error) {
	records, err := r.records(ctx)
	if err != nil {
		return nil, err
	}
	now := r.clock.Now()
	names := make(map[string]bool, len(records))
	var pending []PendingRelease
	for _, rec := range records {
		names[rec.node] = true
		if _, exists, _ := r.nodes.GetByKey(rec.node); exists {
			r.absence.back(rec.node)
			continue
		}
		since := r.absence.mark(rec.node, now)
		pr := PendingRelease{ID: rec.id, Node: rec.node, GoneSince: since, Due: since.Add(r.grace)}
		if now.Before(pr.Due) {
			pending = append(pending, pr)
			continue
		}
		freed, err := r.release(ctx, fence, rec, since)
		if err != nil {
			return nil, err
		}
		if !freed {
			pr.Blocked = blockedReason
			pending = append(pending, pr)
		}
	}
	r.absence.keep(names)
	sort.Slice(pending, func(i, j int) bool { return pending[i].Due.Before(pending[j].Due) })
	return pending, nil
}

// records lists allocatedIDs/; records that do not parse are skipped
// (nodesync logs them; an ID we cannot read is never freed).
func (r *releaser) records(ctx context.Context) ([]idRecord, error) {
	kvs, _, err := r.db.List(ctx, codec.KSRPrefix+vppnode.KeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("ksr: list node IDs: %w", err)
	}
	out := make([]idRecord, 0, len(kvs))
	for _, kv := range kvs {
		id, err := vppnode.ParseKey(kv.Key[len(codec.KSRPrefix):])
		if err != nil {
			continue
		}
		var rec vppnode.VppNode
		if err := codec.Unmarshal(kv.Value, &rec); err != nil || rec.GetName() == "" {
			r.log.Warn("node ID record without a readable node name; never freed", "key", kv.Key)
			continue
		}
		out = append(out, idRecord{id: id, node: rec.GetName(), key: kv.Key, rev: kv.Revision})
	}
	return out, nil
}

// release deletes rec's key in one transaction that holds only while this
// replica leads, the record is unchanged since it was listed (an agent of
// a node that came back rewrites it) and no agent is present for the
// node. A refused transaction frees nothing (freed is false); the next
// check looks again.
func (r *releaser) release(ctx context.Context, fence kvdb.Cmp, rec idRecord, since time.Time) (freed bool, err error) {
	cmps := []kvdb.Cmp{fence, kvdb.IfModRevision(rec.key, rec.rev), kvdb.IfAbsent(vppnode.PresenceKey(rec.node))}
	ok, err := r.db.Txn(ctx, cmps, []kvdb.Op{kvdb.DeleteOp(rec.key)})
	if err != nil {
		return false, fmt.Errorf("ksr: free node ID %d of node %q: %w", rec.id, rec.node, err)
	}
	if !ok {
		r.log.Info("node ID not freed: "+blockedReason, "id", rec.id, "node", rec.node)
		return false, nil
	}
	r.metrics.releases.Inc()
	r.log.Info("node ID freed: its node has been gone for the grace period",
		"id", rec.id, "node", rec.node, "gone-since", since.UTC().Format(time.RFC3339), "grace", r.grace)
	return true, nil
}
