package nodeipam

import (
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// poolFence is a node gone from Kubernetes whose agent may still hold
// addresses in its blocks: they stay in its grant, and it gets no new
// ones, until its agent has been gone for the grace period (or it gives
// them back through its claim's Release).
type poolFence struct {
	since       time.Time   // when the server first found the node gone
	absent, due time.Time   // what AbsentSince said, and since+grace (zero: the agent is present or not known)
	timer       clock.Timer // queues the node at due
}

// holdFence tells whether gone node's blocks stay fenced: it holds blocks
// and its agent may still hold addresses in them (present, not known, or
// absent for less than the grace period). A fence is logged when it
// starts; a due one is checked again at due. false means: purge (its
// transaction takes the second look at the presence key).
func (s *PoolBlockServer) holdFence(node string) bool {
	absent, due := fenceDue(s.agents, node, s.grace)
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.gaugeLocked()
	g := s.grants[node]
	if g == nil || len(g.blocks)+len(g.taken) == 0 {
		s.unfenceLocked(node)
		return false
	}
	hold := due.IsZero() || now.Before(due)
	f := s.fenced[node]
	if f == nil && !hold {
		return false
	}
	if f == nil {
		f = &poolFence{since: now}
		s.fenced[node] = f
		s.log.Info("pool blocks: node gone from Kubernetes while its agent may still hold addresses: its blocks stay fenced (no other node gets them, it gets no new ones)",
			"node", node, "blocks", g.blocks, "agent-gone-since", absent, "grace", s.grace)
	}
	f.absent, f.due = absent, due
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if hold && !due.IsZero() { // else present or not known: the presence watch queues the node when that changes
		f.timer = s.clock.AfterFunc(due.Sub(now), func() { s.queue.Add(node) })
	}
	return hold
}

// unfenceLocked ends node's fence (if any): it tells whether there was one.
func (s *PoolBlockServer) unfenceLocked(node string) bool {
	f := s.fenced[node]
	if f == nil {
		return false
	}
	if f.timer != nil {
		f.timer.Stop()
	}
	delete(s.fenced, node)
	return true
}

// back records that node's Node exists again with its agent present: the
// deletes seen so far are settled, and its blocks are served as before.
func (s *PoolBlockServer) back(node string, deleted int) {
	s.mu.Lock()
	if s.deleted[node] -= deleted; s.deleted[node] <= 0 {
		delete(s.deleted, node)
	}
	fenced := s.unfenceLocked(node)
	s.gaugeLocked()
	s.mu.Unlock()
	s.log.Info("pool blocks: node back in Kubernetes with its agent present: its grant is served again",
		"node", node, "was-fenced", fenced)
}

// onAgent queues a node whose agent's presence changed (every fenced node
// for ""), when it holds or asks for blocks.
func (s *PoolBlockServer) onAgent(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if node == "" {
		for n := range s.fenced {
			s.queue.Add(n)
		}
		return
	}
	_, known := s.grants[node]
	_, claimed := s.claims[node]
	if known || claimed {
		s.queue.Add(node)
	}
}

// stopFenceTimers stops the timers of every fence (Run ends).
func (s *PoolBlockServer) stopFenceTimers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.fenced {
		if f.timer != nil {
			f.timer.Stop()
			f.timer = nil
		}
	}
}

// fencedLocked lists the fences, by node.
func (s *PoolBlockServer) fencedLocked() []FencedNode {
	var out []FencedNode
	for node, f := range s.fenced {
		fn := FencedNode{Node: node, GoneSince: f.since, AgentGoneSince: timePtr(f.absent), Due: timePtr(f.due)}
		if g := s.grants[node]; g != nil {
			for _, b := range slices.Concat(g.blocks, g.taken) {
				fn.Blocks = append(fn.Blocks, b.String())
			}
		}
		out = append(out, fn)
	}
	slices.SortFunc(out, func(a, b FencedNode) int { return strings.Compare(a.Node, b.Node) })
	return out
}
