package nodeipam

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// Run implements CIDRAllocator: it queues every node the informer has and
// every one it sees change or go, and handles them with Config.Workers
// goroutines (a node is never handled by two at once) until stop closes.
func (r *RangeAllocator) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer r.kube.stop()
	reg, err := r.nodes.Informer().AddEventHandler(r.handlers())
	if err != nil {
		r.log.Error("node informer refused the handlers", "err", err)
		return
	}
	defer func() { _ = r.nodes.Informer().RemoveEventHandler(reg) }()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer r.queue.ShutDown()
	if !cache.WaitForCacheSync(stop, reg.HasSynced) {
		return
	}
	r.queueHeld()
	if r.agents != nil {
		stopNotify := r.agents.Notify(r.onAgent)
		defer stopNotify()
		defer r.stopFenceTimers()
	}
	r.log.Info("node CIDR allocator running", "ranges", r.clusters(), "workers", r.workers)
	for range r.workers {
		wg.Go(func() { r.work(ctx) })
	}
	<-stop
}

// queueHeld queues every node the allocator holds blocks for: one deleted
// between New's list and the handlers' registration is not in the
// informer's replay, and its blocks would never be freed otherwise; and
// every fenced one.
func (r *RangeAllocator) queueHeld() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range r.held {
		r.queue.Add(name)
	}
	for name := range r.fenced {
		r.queue.Add(name)
	}
}

// handlers queue the node's name on every event: the worker reads the
// node from the lister, so a node that is gone has its CIDRs freed.
func (r *RangeAllocator) handlers() cache.ResourceEventHandler {
	add := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			r.queue.Add(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: add,
	}
}

// work handles queued nodes until the queue shuts down.
func (r *RangeAllocator) work(ctx context.Context) {
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		if err := r.syncNode(ctx, key); err != nil {
			r.log.Debug("node handled again later", "node", key, "err", err)
			r.queue.AddRateLimited(key)
		} else {
			r.queue.Forget(key)
		}
		r.queue.Done(key)
	}
}

// syncNode gives the node its CIDRs, or frees (fences) them when it is
// gone; a fence not yet in the ledger is written.
func (r *RangeAllocator) syncNode(ctx context.Context, name string) error {
	node, err := r.nodes.Lister().Get(name)
	if apierrors.IsNotFound(err) {
		return r.gone(ctx, name, "")
	}
	if err != nil {
		return err
	}
	if node.DeletionTimestamp != nil {
		return nil
	}
	if err := r.AllocateOrOccupyCIDR(ctx, node); err != nil {
		return err
	}
	return r.recordFence(ctx, name)
}
