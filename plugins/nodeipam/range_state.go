package nodeipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// reservation says where the CIDRs reserve returns come from.
type reservation int

const (
	fresh     reservation = iota // just handed out: claim, then patch
	claimed                      // the node's pending claim: patch again
	settled                      // the node holds them already (a stale copy of the node had none)
	readopted                    // the fenced CIDRs of an earlier node of that name: claim, then patch
)

// reserve returns the CIDRs of the node: those it was patched with
// already (its copy is stale), those of its pending claim, those fenced
// for an earlier node of its name (its agent serves the name), else a
// fresh block of every range. A range that is full undoes the blocks
// taken from the others.
func (r *RangeAllocator) reserve(node *v1.Node) (cidrs []netip.Prefix, from reservation, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.held[node.Name]; h != nil {
		switch {
		case h.uid == node.UID && h.pending:
			return h.cidrs, claimed, nil
		case h.uid == node.UID:
			return h.cidrs, settled, nil
		}
		r.dropLocked(node.Name, h.uid, nil) // an earlier node of that name
	}
	if r.fenced[node.Name] != nil {
		return r.readoptLocked(node)
	}
	cidrs, err = r.book.allocate(node.Name)
	if err != nil {
		return nil, fresh, err
	}
	r.held[node.Name] = &holding{uid: node.UID, cidrs: cidrs, pending: true}
	return cidrs, fresh, nil
}

// occupy marks the CIDRs the node holds as taken, and reports those
// outside every range and those another node holds (neither is
// overwritten).
func (r *RangeAllocator) occupy(node *v1.Node, cidrs []netip.Prefix) {
	outside, conflicts, dropped := r.occupyState(node, cidrs)
	if dropped {
		_ = r.writeRecord(context.Background(), node.Name) // a stale claim is deleted at the next start anyway; a fence is written again by syncNode
	}
	for _, p := range outside {
		r.metrics.fail(ReasonCIDROutOfRange)
		r.kube.warn(node, ReasonCIDROutOfRange, "node %s holds %s, outside the cluster ranges %v; left as it is", node.Name, p, r.clusters())
	}
	for _, c := range conflicts {
		r.metrics.fail(ReasonCIDRConflict)
		r.kube.warn(node, ReasonCIDRConflict, "node %s holds %s, which node %s holds too; left as it is", node.Name, c.cidr, c.other)
	}
}

// occupyState is occupy's bookkeeping; dropped tells whether the node's
// record in the ledger changed (a pending claim now settled by what the
// node holds, or a fence).
func (r *RangeAllocator) occupyState(node *v1.Node, cidrs []netip.Prefix) (outside []netip.Prefix, conflicts []conflict, dropped bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.held[node.Name]; h != nil {
		if !h.pending && h.uid == node.UID && slices.Equal(h.cidrs, cidrs) {
			return nil, nil, false // the common case: an update of a node already occupied
		}
		dropped = h.pending
		if h.uid != node.UID {
			dropped = r.dropLocked(node.Name, h.uid, cidrs) || dropped // an earlier node of that name
		} else {
			r.releaseLocked(node.Name)
		}
	}
	dropped = r.unfenceHeldLocked(node.Name, cidrs) || dropped
	outside, conflicts = r.book.occupy(node.Name, cidrs)
	r.held[node.Name] = &holding{uid: node.UID, cidrs: cidrs}
	delete(r.waiting, node.Name)
	return outside, conflicts, dropped
}

func (r *RangeAllocator) clusters() []netip.Prefix { return r.book.clusters() }

// release frees what node name holds, unless uid is set and names another
// node of that name; it reports whether a claim was pending.
func (r *RangeAllocator) release(name string, uid types.UID) (pending bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.held[name]
	if h == nil || (uid != "" && h.uid != uid) {
		return false
	}
	r.releaseLocked(name)
	return h.pending
}

// releaseLocked frees the blocks node name holds and wakes the nodes that
// wait for CIDRs.
func (r *RangeAllocator) releaseLocked(name string) {
	h := r.held[name]
	if h == nil {
		return
	}
	delete(r.held, name)
	delete(r.waiting, name)
	r.book.free(name, h.cidrs)
	for w := range r.waiting {
		r.queue.Add(w)
	}
}

// assign patches the node with its reserved CIDRs. A node that is gone has
// them freed; one that holds other CIDRs by now keeps those (ours are
// freed). After patchRetries failures the CIDRs stay reserved and claimed
// (the outcome of the last patch is unknown) and the error sends the node
// back to the queue, which patches the same CIDRs again.
func (r *RangeAllocator) assign(ctx context.Context, node *v1.Node, want []netip.Prefix) error {
	var err error
	for range patchRetries {
		var got *v1.Node
		got, err = r.kube.patchCIDRs(ctx, node.Name, want)
		if err == nil {
			r.settled(ctx, got, want)
			return nil
		}
		if done := r.afterPatchError(ctx, node, want, err); done || ctx.Err() != nil {
			return ctx.Err()
		}
	}
	r.metrics.fail(ReasonCIDRAssignmentFailed)
	r.kube.warn(node, ReasonCIDRAssignmentFailed, "node %s: setting pod CIDRs %v failed %d times (kept for the next try): %v",
		node.Name, want, patchRetries, err)
	return err
}

// afterPatchError reads the node back after a failed patch: gone, or
// holding CIDRs now, ends the assignment (done).
func (r *RangeAllocator) afterPatchError(ctx context.Context, node *v1.Node, want []netip.Prefix, perr error) (done bool) {
	cur, err := r.kube.node(ctx, node.Name)
	switch {
	case apierrors.IsNotFound(perr) || apierrors.IsNotFound(err):
		_ = r.gone(ctx, node.Name, node.UID) // an error leaves it to the node's next turn
		return true
	case err != nil:
		return false // unknown: patch again
	case cur.UID != node.UID:
		return true // another node of that name: its own events follow
	}
	have, herr := NodeCIDRs(cur)
	if herr != nil || len(have) == 0 {
		return false
	}
	if slices.Equal(have, want) {
		r.settled(ctx, cur, want)
		return true
	}
	r.log.Warn("node got other CIDRs meanwhile; ours are freed", "node", node.Name, "ours", want, "node-cidrs", have)
	r.occupy(cur, have)
	return true
}

// settled records that the node holds its CIDRs: the claim is deleted and
// a node that had waited has its condition set.
func (r *RangeAllocator) settled(ctx context.Context, node *v1.Node, cidrs []netip.Prefix) {
	r.mu.Lock()
	if h := r.held[node.Name]; h != nil && h.uid == node.UID {
		h.pending = false
	}
	waited := r.waiting[node.Name]
	delete(r.waiting, node.Name)
	r.mu.Unlock()
	r.log.Info("node pod CIDRs set", "node", node.Name, "cidrs", cidrs)
	if err := r.writeRecord(ctx, node.Name); err != nil {
		r.log.Warn("claim not deleted; the next start deletes it", "node", node.Name, "err", err)
	}
	if waited {
		r.kube.normal(node, ReasonCIDRAssigned, "node %s got pod CIDRs %v", node.Name, cidrs)
		if err := r.kube.setCondition(ctx, node.Name, true, ReasonCIDRAssigned, fmt.Sprintf("pod CIDRs %v", cidrs)); err != nil {
			r.log.Warn("condition not set", "node", node.Name, "err", err)
		}
	}
}

// notAvailable reports a node that could not get CIDRs: an Event each
// time, the condition the first time. It is retried with backoff and
// whenever a CIDR is freed.
func (r *RangeAllocator) notAvailable(ctx context.Context, node *v1.Node, cause error) {
	r.mu.Lock()
	first := !r.waiting[node.Name]
	r.waiting[node.Name] = true
	r.mu.Unlock()
	r.metrics.fail(ReasonCIDRNotAvailable)
	r.kube.warn(node, ReasonCIDRNotAvailable, "node %s: %v", node.Name, cause)
	if first {
		if err := r.kube.setCondition(ctx, node.Name, false, ReasonCIDRNotAvailable, cause.Error()); err != nil {
			r.log.Warn("condition not set", "node", node.Name, "err", err)
		}
	}
}
