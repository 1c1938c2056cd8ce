package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
)

// watchRetry is the pause before the claims are listed again after a
// failed list or watch.
const watchRetry = time.Second

// Run serves the claims until ctx ends (nil) or a write finds the
// leadership lost (an error wrapping ErrLostLead): it follows the Nodes
// (a node deleted or replaced is fenced, then has its grant and claim
// deleted), the claims (watched from Start's list on) and the agents'
// presence keys, and handles one node at a time.
// Call it once, after Start; it returns when its goroutines have ended.
func (s *PoolBlockServer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer s.kube.stop()
	defer s.queue.ShutDown()
	reg, err := s.nodes.Informer().AddEventHandler(s.nodeHandlers())
	if err != nil {
		return fmt.Errorf("nodeipam: pool blocks: node informer refused the handlers: %w", err)
	}
	defer func() { _ = s.nodes.Informer().RemoveEventHandler(reg) }()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}
	s.queueKnown()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer s.stopFenceTimers()
	stopNotify := s.agents.Notify(s.onAgent)
	defer stopNotify()
	wg.Go(func() { s.agents.Run(ctx) })
	wg.Go(func() { s.watchClaims(ctx) })
	wg.Go(func() { <-ctx.Done(); s.queue.ShutDown() })
	s.log.Info("pool block server running", "ranges", s.usage(), "maxBlocksPerNode", s.max)
	s.work(ctx, cancel)
	cancel(nil)
	wg.Wait()
	if cause := context.Cause(ctx); errors.Is(cause, ErrLostLead) {
		return cause
	}
	return nil
}

// queueKnown queues every node with a grant or a claim: one whose Node
// is gone has them deleted, the others are served.
func (s *PoolBlockServer) queueKnown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for node := range s.grants {
		s.queue.Add(node)
	}
	for node := range s.claims {
		s.queue.Add(node)
	}
}

// work handles queued nodes until the queue shuts down or the lead is
// lost.
func (s *PoolBlockServer) work(ctx context.Context, cancel context.CancelCauseFunc) {
	for {
		node, quit := s.queue.Get()
		if quit {
			return
		}
		err := s.sync(ctx, node)
		switch {
		case errors.Is(err, ErrLostLead):
			s.log.Warn("pool blocks: leadership lost; the server stops", "node", node, "err", err)
			cancel(err)
		case err != nil && ctx.Err() == nil:
			s.log.Debug("pool blocks: node handled again later", "node", node, "err", err)
			s.queue.AddRateLimited(node)
		default:
			s.queue.Forget(node)
		}
		s.queue.Done(node)
	}
}

// nodeHandlers queue a node that is deleted or replaced by another of the
// same name (its UID changed), marked gone, and a node added (it may come
// back from a fence).
func (s *PoolBlockServer) nodeHandlers() cache.ResourceEventHandler {
	gone := func(obj any) {
		name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.deleted[name]++
		s.mu.Unlock()
		s.queue.Add(name)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if name, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				s.onAgent(name) // queued when it holds or asks for blocks
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if ok1 && ok2 && o.UID != n.UID {
				gone(oldObj)
			}
		},
		DeleteFunc: gone,
	}
}

// watchClaims follows the claims from Start's list until ctx ends. A
// watch that breaks (compaction, the store replaced behind its endpoints:
// see kvdb's watch contract) is followed by a fresh list and a new watch.
// There is no periodic list: while its channel is open, the watch
// delivers every change (see the package documentation).
func (s *PoolBlockServer) watchClaims(ctx context.Context) {
	s.mu.Lock()
	rev := s.claimRev
	s.mu.Unlock()
	for ctx.Err() == nil {
		rev = s.followClaims(ctx, rev)
		for ctx.Err() == nil {
			var err error
			if rev, err = s.relistClaims(ctx); err == nil {
				break
			}
			s.log.Warn("pool blocks: listing the claims failed; retrying", "retry-in", watchRetry, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
		}
	}
}

// followClaims watches the claims from rev+1 until the watch breaks or
// ctx ends, and returns the revision up to which the claims are known.
func (s *PoolBlockServer) followClaims(ctx context.Context, rev int64) int64 {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.db.Watch(wctx, claimPrefix, rev+1)
	if err != nil {
		s.log.Warn("pool blocks: watching the claims failed; listing them again", "err", err)
		return rev
	}
	for ev := range ch {
		s.claimEvent(ev)
		rev = ev.Revision
	}
	if ctx.Err() == nil {
		s.log.Info("pool blocks: the claim watch broke; listing the claims again")
	}
	return rev
}

// claimEvent records a watched change of a claim and queues its node.
func (s *PoolBlockServer) claimEvent(ev kvdb.WatchEvent) {
	node, ok := strings.CutPrefix(ev.Key, claimPrefix)
	if !ok || node == "" || strings.Contains(node, "/") {
		return
	}
	s.log.Debug("pool blocks: claim changed", "node", node, "change", ev.Type, "revision", ev.Revision)
	var reports []poolReport
	s.mu.Lock()
	if ev.Type == kvdb.EventDelete {
		delete(s.claims, node)
		delete(s.claimRevs, node)
	} else {
		reports = s.setClaimLocked(ev.Key, ev.Value, ev.Revision)
	}
	s.gaugeLocked()
	s.mu.Unlock()
	s.report(reports)
	s.queue.Add(node)
}

// relistClaims replaces the claims with a fresh list and queues every
// node that had or has one. It runs only after a broken watch, so it
// compares nothing: a store replaced behind its endpoints may hold other
// claims at the mod revisions the server knows.
func (s *PoolBlockServer) relistClaims(ctx context.Context) (int64, error) {
	kvs, rev, err := s.db.List(ctx, claimPrefix)
	if err != nil {
		return 0, err
	}
	var reports []poolReport
	s.mu.Lock()
	for node := range s.claimRevs {
		s.queue.Add(node)
	}
	clear(s.claims)
	clear(s.claimRevs)
	for _, kv := range kvs {
		reports = append(reports, s.setClaimLocked(kv.Key, kv.Value, kv.Revision)...)
		s.queue.Add(strings.TrimPrefix(kv.Key, claimPrefix))
	}
	s.gaugeLocked()
	s.mu.Unlock()
	s.report(reports)
	return rev, nil
}

// setClaimLocked decodes the claim stored under key and records it; a
// claim that cannot be decoded, or names another node, is dropped and
// reported (the node's grant stays as it is).
func (s *PoolBlockServer) setClaimLocked(key string, value []byte, rev int64) []poolReport {
	node, ok := strings.CutPrefix(key, claimPrefix)
	if !ok || node == "" || strings.Contains(node, "/") {
		s.log.Warn("pool blocks: a key under the claims that names no node; ignored", "key", key)
		return nil
	}
	s.claimRevs[node] = rev
	c, err := poolblock.ParseClaim(value)
	if err == nil && c.Node != node {
		err = fmt.Errorf("pool claim %s names node %q", key, c.Node)
	}
	if err != nil {
		delete(s.claims, node)
		delete(s.unmet, node)
		return []poolReport{{node, ReasonInvalidPoolClaim, fmt.Sprintf("node %s: %v; ignored", node, err)}}
	}
	s.claims[node] = c
	s.unmet[node] = true // until served
	return nil
}

// poolReport is a problem to log, count and raise as an Event on the node.
type poolReport struct {
	node, reason, msg string
}

// report emits the reports (an Event when the Node exists).
func (s *PoolBlockServer) report(reports []poolReport) {
	for _, r := range reports {
		s.metrics.fail(r.reason)
		node, err := s.nodes.Lister().Get(r.node)
		if err != nil {
			s.log.Warn(r.msg, "node", r.node, "reason", r.reason)
			continue
		}
		s.kube.warn(node, r.reason, "%s", r.msg)
	}
}
