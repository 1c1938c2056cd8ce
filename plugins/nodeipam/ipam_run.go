package nodeipam

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Run implements CIDRAllocator: it starts the loops of the nodes handed
// in so far and one for every node the informer has or adds, until stop
// closes; it returns when every loop has ended. It runs once: a second
// Run returns at once.
func (c *IPAMController) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer c.s.kube.stop()
	if !c.start(ctx) {
		return
	}
	defer c.wait(cancel)
	reg, err := c.nodes.Informer().AddEventHandler(c.handlers())
	if err != nil {
		c.s.log.Error("node informer refused the handlers", "err", err)
		return
	}
	defer func() { _ = c.nodes.Informer().RemoveEventHandler(reg) }()
	if !cache.WaitForCacheSync(stop, reg.HasSynced) {
		return
	}
	c.s.log.Info("node IPAM sync controller running", "mode", c.s.mode, "ranges", c.s.sets.clusters())
	<-stop
}

// start records ctx as Run's and starts the loops made so far.
func (c *IPAMController) start(ctx context.Context) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx != nil || c.stopped {
		return false
	}
	c.ctx = ctx
	for _, n := range c.loops {
		c.spawn(n)
	}
	for n := range c.ending {
		if c.loops[n.name] != n {
			c.spawn(n)
		}
	}
	return true
}

// wait stops the loops and waits for them.
func (c *IPAMController) wait(cancel context.CancelFunc) {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	cancel()
	c.wg.Wait()
}

// handlers hand the nodes to their loops: every add, every update that
// changes the pod CIDRs (the resyncs see the others), every delete.
func (c *IPAMController) handlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if node, ok := obj.(*v1.Node); ok {
				_ = c.AllocateOrOccupyCIDR(context.Background(), node)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*v1.Node)
			node, ok2 := obj.(*v1.Node)
			if ok1 && ok2 && !samePodCIDRs(o, node) {
				_ = c.AllocateOrOccupyCIDR(context.Background(), node)
			}
		},
		DeleteFunc: func(obj any) {
			if node := deletedNode(obj); node != nil {
				_ = c.ReleaseCIDR(context.Background(), node)
			}
		},
	}
}

// samePodCIDRs tells whether a and b hold the same pod CIDR fields.
func samePodCIDRs(a, b *v1.Node) bool {
	return a.Spec.PodCIDR == b.Spec.PodCIDR && slices.Equal(a.Spec.PodCIDRs, b.Spec.PodCIDRs)
}

// deletedNode returns the node of a delete event (or of its tombstone).
func deletedNode(obj any) *v1.Node {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	node, _ := obj.(*v1.Node)
	return node
}
