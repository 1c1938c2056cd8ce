package nodeipam

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// cidrFence is the CIDRs of a deleted Node (or of an earlier Node of a
// name) that the range allocator keeps from every other node while the
// agent that served the name may still hold addresses in them. The book
// still counts them as the name's.
type cidrFence struct {
	uid         types.UID
	cidrs       []netip.Prefix
	since       time.Time   // when the Node was seen gone
	absent, due time.Time   // what Agents said, and absent+grace (zero: present or not known)
	timer       clock.Timer // queues the name at due
	// gen counts the changes of cidrs; recorded is the gen the ledger holds.
	gen, recorded int
}

// gone fences (with Agents) or frees (without) what node name holds,
// unless uid names another node of that name, and checks its fence.
func (r *RangeAllocator) gone(ctx context.Context, name string, uid types.UID) error {
	if r.agents == nil {
		if r.release(name, uid) {
			return r.ledger.Delete(ctx, name)
		}
		return nil
	}
	r.mu.Lock()
	if h := r.held[name]; h != nil && (uid == "" || h.uid == uid) {
		r.dropLocked(name, h.uid, nil)
	}
	r.mu.Unlock()
	if err := r.recordFence(ctx, name); err != nil {
		return err
	}
	return r.checkFence(ctx, name)
}

// dropLocked takes away what name holds (node uid held it): without
// Agents it is freed; with Agents the CIDRs not in keep (those the next
// node of that name holds) are fenced. It tells whether the fence
// changed.
func (r *RangeAllocator) dropLocked(name string, uid types.UID, keep []netip.Prefix) bool {
	if r.agents == nil {
		r.releaseLocked(name)
		return false
	}
	h := r.held[name]
	if h == nil {
		return false
	}
	delete(r.held, name)
	delete(r.waiting, name)
	cidrs := slices.DeleteFunc(slices.Clone(h.cidrs), func(p netip.Prefix) bool { return slices.Contains(keep, p) })
	if len(cidrs) == 0 {
		return false
	}
	f := r.fenced[name]
	if f == nil {
		f = &cidrFence{since: r.clock.Now()}
		r.fenced[name] = f
	}
	f.uid = uid
	for _, p := range cidrs {
		if !slices.Contains(f.cidrs, p) {
			f.cidrs = append(f.cidrs, p)
		}
	}
	f.gen++
	r.gaugeFencedLocked()
	r.log.Info("node gone from Kubernetes while its agent may still hold addresses: its CIDRs stay fenced (no other node gets them)",
		"node", name, "uid", uid, "cidrs", f.cidrs, "grace", r.grace)
	return true
}

// unfenceHeldLocked takes the CIDRs node name now holds out of its fence:
// they are the node's again. It tells whether the fence changed.
func (r *RangeAllocator) unfenceHeldLocked(name string, cidrs []netip.Prefix) bool {
	f := r.fenced[name]
	if f == nil {
		return false
	}
	rest := slices.DeleteFunc(slices.Clone(f.cidrs), func(p netip.Prefix) bool { return slices.Contains(cidrs, p) })
	if len(rest) == len(f.cidrs) {
		return false
	}
	f.cidrs = rest
	f.gen++
	if len(rest) == 0 {
		r.unfenceLocked(name)
	}
	r.gaugeFencedLocked()
	r.log.Info("fenced CIDRs held again by a node of the same name", "node", name, "cidrs", cidrs, "still-fenced", rest)
	return true
}

// readoptLocked gives node, which has no CIDRs, the fenced CIDRs of the
// earlier node of its name (the agent that serves the name may use them),
// completed with fresh blocks of the ranges they lack.
func (r *RangeAllocator) readoptLocked(node *v1.Node) ([]netip.Prefix, reservation, error) {
	f := r.fenced[node.Name]
	cidrs, kept, err := r.book.complete(node.Name, f.cidrs)
	if err != nil {
		return nil, readopted, err
	}
	r.unfenceHeldLocked(node.Name, kept)
	r.held[node.Name] = &holding{uid: node.UID, cidrs: cidrs, pending: true}
	r.log.Info("node of a fenced name: it gets the fenced CIDRs back", "node", node.Name, "cidrs", cidrs)
	return cidrs, readopted, nil
}

// unreserve undoes a reservation whose claim could not be written: fresh
// blocks are freed, readopted ones fenced again.
func (r *RangeAllocator) unreserve(node *v1.Node, from reservation) {
	if from != readopted {
		r.release(node.Name, "")
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.held[node.Name]; h != nil && h.uid == node.UID {
		r.dropLocked(node.Name, h.uid, nil)
	}
}

// checkFence frees name's fenced CIDRs once its agent has been absent for
// the grace period and is still absent when its key is read once more;
// before that it arms a timer for when it may be.
func (r *RangeAllocator) checkFence(ctx context.Context, name string) error {
	absent, due := fenceDue(r.agents, name, r.grace)
	now := r.clock.Now()
	r.mu.Lock()
	f := r.fenced[name]
	if f == nil {
		r.mu.Unlock()
		return nil
	}
	f.absent, f.due = absent, due
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if due.IsZero() || now.Before(due) {
		if !due.IsZero() {
			f.timer = r.clock.AfterFunc(due.Sub(now), func() { r.queue.Add(name) })
		}
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	present, err := r.agents.Present(ctx, name)
	if err != nil || present { // present: the watch has not told yet; it queues the name when it does
		return err
	}
	return r.lift(ctx, name, f)
}

// lift frees fence f of name: first its record leaves the ledger, then
// its CIDRs (but those a node of that name holds) are freed.
func (r *RangeAllocator) lift(ctx context.Context, name string, f *cidrFence) error {
	r.mu.Lock()
	c, keep := r.recordOf(name, false)
	r.mu.Unlock()
	if err := r.putRecord(ctx, c, keep); err != nil {
		return err
	}
	r.mu.Lock()
	if r.fenced[name] != f {
		r.mu.Unlock()
		return nil
	}
	free := f.cidrs
	if h := r.held[name]; h != nil {
		free = slices.DeleteFunc(slices.Clone(free), func(p netip.Prefix) bool { return slices.Contains(h.cidrs, p) })
	}
	r.unfenceLocked(name)
	r.book.free(name, free)
	for w := range r.waiting {
		r.queue.Add(w)
	}
	r.gaugeFencedLocked()
	r.mu.Unlock()
	r.log.Info("fence lifted: the deleted node's agent stayed away for the grace period; its CIDRs are freed",
		"node", name, "cidrs", free, "agent-gone-since", f.absent, "grace", r.grace)
	return nil
}

// unfenceLocked forgets name's fence (its CIDRs stay in the book).
func (r *RangeAllocator) unfenceLocked(name string) {
	if f := r.fenced[name]; f != nil && f.timer != nil {
		f.timer.Stop()
	}
	delete(r.fenced, name)
}

// recordOf is the ledger record of name: its pending claim and (with
// withFence) its fence; keep is false when there is nothing to record.
func (r *RangeAllocator) recordOf(name string, withFence bool) (c Claim, keep bool) {
	c = Claim{Node: name}
	if h := r.held[name]; h != nil && h.pending {
		c.UID, c.CIDRs = string(h.uid), cidrStrings(h.cidrs)
	}
	if f := r.fenced[name]; f != nil && withFence && len(f.cidrs) > 0 {
		c.Fenced = cidrStrings(f.cidrs)
		if c.UID == "" {
			c.UID = string(f.uid)
		}
	}
	return c, len(c.CIDRs)+len(c.Fenced) > 0
}

func (r *RangeAllocator) putRecord(ctx context.Context, c Claim, keep bool) error {
	if keep {
		return r.ledger.Put(ctx, c)
	}
	return r.ledger.Delete(ctx, c.Node)
}

// writeRecord writes name's record (its pending claim and its fence), or
// deletes it when there is nothing to record.
func (r *RangeAllocator) writeRecord(ctx context.Context, name string) error {
	r.mu.Lock()
	c, keep := r.recordOf(name, true)
	f := r.fenced[name]
	gen := 0
	if f != nil {
		gen = f.gen
	}
	r.mu.Unlock()
	if err := r.putRecord(ctx, c, keep); err != nil {
		return err
	}
	r.markRecorded(name, f, gen)
	return nil
}

func (r *RangeAllocator) markRecorded(name string, f *cidrFence, gen int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f != nil && r.fenced[name] == f && f.gen == gen {
		f.recorded = gen
	}
}

// recordFence writes name's record when its fence changed since it was
// last written.
func (r *RangeAllocator) recordFence(ctx context.Context, name string) error {
	r.mu.Lock()
	f := r.fenced[name]
	dirty := f != nil && f.recorded != f.gen
	r.mu.Unlock()
	if !dirty {
		return nil
	}
	return r.writeRecord(ctx, name)
}

// rewriteRecord writes c's node's record when it differs from c (what the
// ledger held at start).
func (r *RangeAllocator) rewriteRecord(ctx context.Context, c Claim) error {
	r.mu.Lock()
	now, keep := r.recordOf(c.Node, true)
	f := r.fenced[c.Node]
	gen := 0
	if f != nil {
		gen = f.gen
	}
	r.mu.Unlock()
	same := keep && now.UID == c.UID && slices.Equal(now.CIDRs, c.CIDRs) && slices.Equal(now.Fenced, c.Fenced)
	if !same {
		if err := r.putRecord(ctx, now, keep); err != nil {
			return err
		}
	}
	r.markRecorded(c.Node, f, gen)
	return nil
}

// restoreFence fences, at start, the CIDRs of record c that its node (nil:
// gone) does not hold: its Fenced, and its pending CIDRs when the claim
// was not restored because its node is gone or replaced (the patch may
// have landed).
func (r *RangeAllocator) restoreFence(c Claim, node *v1.Node, restored bool) {
	strs := slices.Clone(c.Fenced)
	if !restored && (node == nil || string(node.UID) != c.UID) {
		strs = append(strs, c.CIDRs...)
	}
	var keep []netip.Prefix
	if node != nil {
		keep, _ = NodeCIDRs(node)
	}
	var cidrs []netip.Prefix
	for _, s := range strs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			r.log.Warn("a fenced CIDR in the ledger is not a CIDR; it cannot be fenced", "node", c.Node, "value", s)
			continue
		}
		if !slices.Contains(keep, p) && !slices.Contains(cidrs, p) {
			cidrs = append(cidrs, p)
		}
	}
	if len(cidrs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, conflicts := r.book.occupy(c.Node, cidrs)
	for _, cf := range conflicts {
		r.log.Warn("a fenced CIDR is held by another node too; that node keeps it", "node", c.Node, "cidr", cf.cidr, "other", cf.other)
	}
	r.fenced[c.Node] = &cidrFence{uid: types.UID(c.UID), cidrs: cidrs, since: r.clock.Now(), gen: 1}
	r.gaugeFencedLocked()
	r.log.Info("fence restored from the ledger: the CIDRs of a deleted node stay fenced", "node", c.Node, "cidrs", cidrs)
}

// onAgent queues a fenced name whose agent's presence changed (every
// fenced name for "").
func (r *RangeAllocator) onAgent(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := range r.fenced {
		if name == "" || n == name {
			r.queue.Add(n)
		}
	}
}

// stopFenceTimers stops every fence's timer (Run ends).
func (r *RangeAllocator) stopFenceTimers() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.fenced {
		if f.timer != nil {
			f.timer.Stop()
			f.timer = nil
		}
	}
}

// gaugeFencedLocked sets the fenced gauge of every range.
func (r *RangeAllocator) gaugeFencedLocked() {
	for _, set := range r.book.sets {
		n := 0
		for _, f := range r.fenced {
			for _, p := range f.cidrs {
				if set.ClusterCIDR().Contains(p.Masked().Addr()) {
					n++
				}
			}
		}
		r.metrics.fenced.WithLabelValues(set.ClusterCIDR().String()).Set(float64(n))
	}
}

// fencedLocked lists the fences, by node.
func (r *RangeAllocator) fencedLocked() []FencedNode {
	var out []FencedNode
	for name, f := range r.fenced {
		out = append(out, FencedNode{Node: name, Blocks: cidrStrings(f.cidrs), GoneSince: f.since,
			AgentGoneSince: timePtr(f.absent), Due: timePtr(f.due)})
	}
	slices.SortFunc(out, func(a, b FencedNode) int { return strings.Compare(a.Node, b.Node) })
	return out
}
