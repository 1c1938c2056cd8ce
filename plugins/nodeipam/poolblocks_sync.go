package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/poolblock"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// errCASLost: a write found a grant (or the generation) changed since it
// was read; everything was read again and the node is handled again.
var errCASLost = errors.New("the grants changed meanwhile (compare-and-swap lost); read again")

// sync brings node's grant in line with its claim; a node whose Node is
// gone keeps its blocks, without new ones, while its agent may still hold
// addresses in them (fenced), and has its grant and claim deleted after.
func (s *PoolBlockServer) sync(ctx context.Context, node string) error {
	s.mu.Lock()
	stale := s.stale
	s.mu.Unlock()
	if stale { // a write's outcome is unknown: read it back before anything is freed or handed out
		if err := s.reread(ctx); err != nil {
			return fmt.Errorf("read the grants back: %w", err)
		}
	}
	s.mu.Lock()
	_, known := s.grants[node]
	_, claimed := s.claims[node]
	deleted := s.deleted[node]
	if !known && !claimed { // nothing held, nothing asked: no write, even for a Node deleted
		delete(s.deleted, node)
		delete(s.unmet, node)
		delete(s.waiting, node)
		s.unfenceLocked(node)
		s.gaugeLocked()
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	live, err := s.live(ctx, node, deleted)
	if err != nil {
		return err
	}
	if !live && !s.holdFence(node) {
		return s.purge(ctx, node, deleted)
	}
	p, reports := s.plan(node, live)
	s.report(reports)
	if !p.write {
		return nil
	}
	if err := s.write(ctx, node, p); err != nil {
		return err
	}
	if !live && len(p.next) == 0 {
		s.queue.Add(node) // nothing left to fence: the next turn deletes its grant and claim
	}
	return nil
}

// live tells whether node is served as usual: its Node exists and was
// not deleted (or replaced) since the last purge, or it was and has come
// back with its agent present (the agent that serves the name holds the
// blocks). The informer's cache is asked first, then the API, so that a
// Node the cache has not seen yet is live.
func (s *PoolBlockServer) live(ctx context.Context, node string, deleted int) (bool, error) {
	exists, err := s.exists(ctx, node)
	if err != nil || !exists {
		return false, err
	}
	if deleted > 0 {
		present, err := s.agents.Present(ctx, node)
		if err != nil || !present {
			return false, err
		}
		s.back(node, deleted)
	}
	s.mu.Lock()
	s.unfenceLocked(node)
	s.mu.Unlock()
	return true, nil
}

// exists tells whether node's Node exists.
func (s *PoolBlockServer) exists(ctx context.Context, node string) (bool, error) {
	if _, err := s.nodes.Lister().Get(node); err == nil {
		return true, nil
	} else if !apierrors.IsNotFound(err) {
		return false, err
	}
	_, err := s.kube.node(ctx, node)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("node %s: %w", node, err)
	}
	return true, nil
}

// purge deletes node's grant (compared with its mod revision) and claim
// in one fenced transaction, then frees its blocks. When the grant holds
// blocks the transaction also holds only while node's presence key is
// absent (the second look at the agent).
func (s *PoolBlockServer) purge(ctx context.Context, node string, deleted int) error {
	s.mu.Lock()
	var rev int64
	holds := false
	if g := s.grants[node]; g != nil {
		rev, holds = g.rev, len(g.blocks)+len(g.taken) > 0
	}
	s.mu.Unlock()
	cmps := append(s.fenceCmps(), kvdb.IfModRevision(grantKey(node), rev))
	if holds {
		cmps = append(cmps, kvdb.IfAbsent(vppnode.PresenceKey(node)))
	}
	ops := []kvdb.Op{kvdb.DeleteOp(grantKey(node)), kvdb.DeleteOp(claimKey(node))}
	ok, err := s.txn(ctx, cmps, ops)
	if err != nil {
		s.markStale()
		return fmt.Errorf("delete the grant and claim of node %s (gone): outcome unknown: %w", node, err)
	}
	if !ok {
		return s.lost(ctx, node, nil)
	}
	s.mu.Lock()
	freed := 0
	if g := s.grants[node]; g != nil {
		freed = s.dropLocked(node, g, nil)
		delete(s.grants, node)
	}
	delete(s.claims, node)
	delete(s.claimRevs, node)
	delete(s.unmet, node)
	delete(s.waiting, node)
	if s.deleted[node] -= deleted; s.deleted[node] <= 0 {
		delete(s.deleted, node)
	}
	fenced := s.unfenceLocked(node)
	if freed > 0 {
		s.wakeLocked()
	}
	s.gaugeLocked()
	s.mu.Unlock()
	s.log.Info("pool blocks: node gone from Kubernetes and its agent away for the grace period (or nothing granted): its grant and claim deleted, its blocks freed",
		"node", node, "freed", freed, "was-fenced", fenced, "grace", s.grace)
	return nil
}

// poolPlan is a grant to write.
type poolPlan struct {
	write  bool
	old    []netip.Prefix // the grant as etcd holds it
	next   []netip.Prefix // the grant to write
	rev    int64          // old's mod revision (0: none)
	genRev int64
	taken  []netip.Prefix // blocks of next that old lacks
	short  bool           // some family gets fewer blocks than it wants
}

// plan computes node's next grant: its blocks minus the released ones,
// then, when it may grow (its Node lives), per family, the next free
// blocks until it holds what it wants (at most maxBlocksPerNode). The
// blocks taken are held for the node (in the grant's taken) until the
// write's outcome is known. A node that a full range cannot serve waits
// (reported once).
func (s *PoolBlockServer) plan(node string, grow bool) (poolPlan, []poolReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.gaugeLocked()
	c, ok := s.claims[node]
	if !ok { // no claim: the grant stays as it is
		delete(s.unmet, node)
		delete(s.waiting, node)
		return poolPlan{}, nil
	}
	g := s.grants[node]
	if g == nil {
		g = &poolGrant{}
		s.grants[node] = g
	}
	release := make(map[netip.Prefix]bool, len(c.Release))
	for _, p := range c.Release {
		release[p] = true
	}
	p := poolPlan{old: g.blocks, rev: g.rev, genRev: s.genRev}
	p.next = slices.DeleteFunc(slices.Clone(g.blocks), func(b netip.Prefix) bool { return release[b] })
	var reports []poolReport
	for _, f := range wantedFamilies(c, s.book) {
		want := min(c.Want[f], s.max)
		if !grow {
			want = 0
		}
		have := countFamily(p.next, f)
		for have < want {
			b, err := s.book.take(node, f, release)
			if err != nil {
				p.short = true
				if !s.waiting[node] {
					reports = append(reports, poolReport{node, ReasonPoolBlockNotAvailable, fmt.Sprintf(
						"node %s wants %d added %s blocks and holds %d: %s; it gets them when blocks are freed",
						node, want, f, have, s.fullLocked(f))})
				}
				break
			}
			p.taken = append(p.taken, b)
			p.next = append(p.next, b)
			have++
		}
	}
	g.taken = p.taken
	p.write = !slices.Equal(p.next, p.old) || (p.rev == 0 && len(p.next) > 0)
	if p.short {
		s.waiting[node] = true
	} else {
		delete(s.waiting, node)
	}
	if !p.write && !p.short {
		delete(s.unmet, node)
	}
	if !p.write && g.rev == 0 && len(g.taken) == 0 {
		delete(s.grants, node) // nothing held, nothing written
	}
	return p, reports
}

// fullLocked says why no block of family f could be taken.
func (s *PoolBlockServer) fullLocked(f string) string {
	set := s.book.sets[f]
	if set == nil {
		return "there is no " + f + " pool range"
	}
	return fmt.Sprintf("the pool range %s has no free /%d block (%d blocks, none free that this node has not released)",
		set.ClusterCIDR(), set.MaskSize(), set.Size())
}

// wantedFamilies are the families with a range and those the claim wants,
// sorted.
func wantedFamilies(c poolblock.Claim, b *poolBook) []string {
	out := b.families()
	for f, n := range c.Want {
		if n > 0 && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

func countFamily(blocks []netip.Prefix, family string) int {
	n := 0
	for _, b := range blocks {
		if poolblock.Family(b) == family {
			n++
		}
	}
	return n
}

// write writes p's grant with a compare-and-swap on the grant's and the
// generation key's mod revisions, and the fence. The blocks the new grant
// lacks are freed only once it is known durable; a write of unknown
// outcome keeps every block held and makes the next sync read the grants
// back first.
func (s *PoolBlockServer) write(ctx context.Context, node string, p poolPlan) error {
	value, err := json.Marshal(poolblock.Grant{Node: node, Blocks: p.next})
	if err != nil {
		return err
	}
	gen, err := json.Marshal(map[string]string{"node": node})
	if err != nil {
		return err
	}
	cmps := append(s.fenceCmps(), kvdb.IfModRevision(grantKey(node), p.rev), kvdb.IfModRevision(s.genKey, p.genRev))
	ok, err := s.txn(ctx, cmps, []kvdb.Op{kvdb.PutOp(grantKey(node), value), kvdb.PutOp(s.genKey, gen)})
	if err != nil {
		s.markStale()
		return fmt.Errorf("write the grant of node %s %v: outcome unknown: %w", node, p.next, err)
	}
	if !ok {
		return s.lost(ctx, node, p.taken)
	}
	// The revision the next compare-and-swap needs; a failed read makes the
	// next sync read every grant again.
	kv, found, rerr := s.db.Get(ctx, grantKey(node))
	s.mu.Lock()
	g := s.grants[node]
	if g == nil { // cannot happen: only this goroutine removes grants
		g = &poolGrant{}
		s.grants[node] = g
	}
	freed := s.dropLocked(node, &poolGrant{blocks: p.old}, p.next)
	g.blocks, g.taken = p.next, nil
	if rerr == nil && found && string(kv.Value) == string(value) {
		g.rev, s.genRev = kv.Revision, kv.Revision
	} else {
		s.stale = true
	}
	if !p.short {
		delete(s.unmet, node)
	}
	if freed > 0 {
		s.wakeLocked()
	}
	s.gaugeLocked()
	s.mu.Unlock()
	s.log.Info("pool blocks: grant written", "node", node, "blocks", p.next, "added", p.taken, "freed", freed)
	return nil
}

// lost handles a refused write: it did not apply, so the blocks taken for
// it are freed. A lost fence is ErrLostLead; else the grants changed
// (another writer, or an operator): they are read again.
func (s *PoolBlockServer) lost(ctx context.Context, node string, taken []netip.Prefix) error {
	s.mu.Lock()
	if g := s.grants[node]; g != nil {
		g.taken = nil
	}
	for _, p := range taken {
		s.book.drop(node, p)
	}
	s.gaugeLocked()
	s.mu.Unlock()
	if s.fence != nil {
		leading, err := s.txn(ctx, s.fence(), nil)
		if err != nil {
			s.markStale()
			return fmt.Errorf("node %s: write refused; checking the fence: %w", node, err)
		}
		if !leading {
			return fmt.Errorf("pool blocks: node %s: %w", node, ErrLostLead)
		}
	}
	if err := s.reread(ctx); err != nil {
		s.markStale()
		return fmt.Errorf("node %s: %w; reading them: %w", node, errCASLost, err)
	}
	return fmt.Errorf("node %s: %w", node, errCASLost)
}

// txn runs one transaction, bounded by writeTimeout.
func (s *PoolBlockServer) txn(ctx context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return s.db.Txn(ctx, cmps, ops)
}

func (s *PoolBlockServer) fenceCmps() []kvdb.Cmp {
	if s.fence == nil {
		return nil
	}
	return slices.Clone(s.fence())
}

func (s *PoolBlockServer) markStale() {
	s.mu.Lock()
	s.stale = true
	s.mu.Unlock()
}
