package nodesync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// DefaultMaxClaimAttempts bounds the transactions of one node ID claim. A
// transaction is lost only when another writer created that very key
// during the claim; a herd of 5,000 nodes starting at once needs far
// fewer (see tests/bench/nodeids), well below the bound.
const DefaultMaxClaimAttempts = 100

// claimDeadline bounds a whole claim (every request is also bounded by
// the store's own operation timeout).
const claimDeadline = time.Minute

// claimStats count what one claim did.
type claimStats struct {
	Attempts  int    // transactions sent
	Conflicts int    // transactions lost: the candidate was taken meanwhile
	Reads     int    // single-key reads: the stored ID's record, the index, the indexed record
	Listings  int    // listings of allocatedIDs/
	Listed    int    // keys those listings returned
	Decoded   int    // record values decoded (those that may name this node)
	FoundBy   string // how this node's record was found; "" when created
	Window    int    // the window of the last candidate (0: the stored ID only)
}

// idListing is one listing of allocatedIDs/.
type idListing struct {
	taken   []uint32                    // every valid ID key, ascending
	own     []uint32                    // IDs whose record names this node, ascending
	ownRec  map[uint32]*vppnode.VppNode // records of own
	decoded int                         // values decoded
	listed  int                         // keys returned
}

// claim is the first claim of this node's ID (see the package doc): the
// presence, then the ID in etcd (the stored ID preferred), then the check
// against the stored ID. Every error is an api.FatalError.
func (p *Plugin) claim(me *Node) (uint32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.claimTimeout())
	defer cancel()
	fail := func(err error) (uint32, error) {
		return 0, api.NewFatalError(fmt.Errorf("unable to allocate node ID for node %q: %w", p.name, err))
	}
	err := p.ensurePresence(ctx)
	if errors.Is(err, ErrNodeNameTaken) {
		return 0, p.loseID(conflictName, err)
	}
	if err != nil {
		return 0, &transientError{fmt.Errorf("unable to allocate node ID for node %q: %w", p.name, err)}
	}
	st, err := p.loadStoredID(ctx)
	if err != nil {
		return fail(err)
	}
	id, rec, err := p.claimNodeID(ctx, st.id)
	if errors.Is(err, ErrClaimGaveUp) || errors.Is(err, ErrNoDatabase) {
		return 0, api.NewFatalError(err)
	}
	if err != nil {
		return 0, &transientError{err} // etcd unreachable or timed out
	}
	if err := p.adoptID(st, id, "the claim in etcd"); err != nil {
		return 0, api.NewFatalError(err)
	}
	p.nodeID.Store(id)
	if rec != nil && len(me.VppIPAddresses) == 0 {
		me.VppIPAddresses = p.parseVppAddresses(rec)
	}
	return id, nil
}

// claimTimeout bounds a claim or a re-assert: the claim itself plus the
// longest wait for another agent's stale presence.
func (p *Plugin) claimTimeout() time.Duration {
	return claimDeadline + p.cfg.PresenceTTL + staleMargin
}

// claimNodeID finds this node's ID in etcd or creates one (see the
// package doc): its record found by the stored ID (preferred, 0 for none),
// the index or a listing; else preferred when it is free, else one of the
// smallest free IDs of the listing's view. rec is the found record, nil
// when created.
func (p *Plugin) claimNodeID(ctx context.Context, preferred uint32) (id uint32, rec *vppnode.VppNode, err error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("unable to allocate node ID for node %q: "+format, append([]any{p.name}, args...)...)
	}
	if p.broker == nil {
		return 0, nil, fail("%w", ErrNoDatabase)
	}
	var st claimStats
	defer func() { p.setClaimStats(st) }()
	start := time.Now()
	found, err := p.findOwn(ctx, preferred, &st)
	if err != nil {
		return 0, nil, fail("cannot look up node IDs in the database: %w", err)
	}
	if found.rec != nil {
		p.Log.Info("node ID found in etcd", "node", p.name, "node-id", found.id, "by", st.FoundBy,
			"listings", st.Listings, "reads", st.Reads)
		return found.id, found.rec, nil
	}
	c, err := p.createFree(ctx, newIDView(found.listing.taken), preferred, found.active, &st)
	if err != nil {
		return 0, nil, fail("%w", err)
	}
	p.Log.Info("node ID claimed", "node", p.name, "node-id", c, "preferred", preferred, "attempts", st.Attempts,
		"conflicts", st.Conflicts, "listings", st.Listings, "keys-listed", st.Listed, "reads", st.Reads,
		"first-window", window(found.active, 0), "took", time.Since(start))
	return c, nil, nil
}

// createFree creates the record (and index) of a free ID: preferred when
// the view has it free, else candidates picked among the window smallest
// free IDs of the view, window(active, lost) for lost transactions lost
// so far. A lost transaction marks its ID taken in the view; the claim
// lists again only after relistAfter losses since its last listing, or
// when the view has no free ID up to the bound left after a loss (a view
// fresh from a listing that has none is exhaustion).
func (p *Plugin) createFree(ctx context.Context, view *idView, preferred uint32, active int, st *claimStats) (uint32, error) {
	bound := p.idBound()
	pick := p.pick
	if pick == nil {
		pick = namePick(p.name)
	}
	tryPreferred := preferred != 0 && preferred <= bound && !view.isTaken(preferred)
	var last uint32
	var free []uint32
	lostSinceListing := 0
	for {
		if st.Attempts >= p.maxAttempts {
			return 0, fmt.Errorf("%w after %d attempts, last candidate ID %d was taken", ErrClaimGaveUp, st.Attempts, last)
		}
		var c uint32
		if tryPreferred {
			c, tryPreferred = preferred, false
		} else {
			st.Window = cappedWindow(active, st.Conflicts, len(view.taken))
			free = view.firstFree(free[:0], st.Window, bound)
			if (len(free) == 0 && lostSinceListing > 0) || lostSinceListing >= relistAfter {
				l, _, err := p.listIDs(ctx)
				st.Listings++
				st.Listed += l.listed
				if err != nil {
					return 0, fmt.Errorf("cannot list node IDs in the database: %w", err)
				}
				view, lostSinceListing = newIDView(l.taken), 0
				continue
			}
			if len(free) == 0 {
				return 0, fmt.Errorf("every node ID up to %d is taken (the largest the node subnets of the IPAM config allow; contiv-ksr frees the IDs of deleted Nodes)", bound)
			}
			c = free[pick(len(free))]
		}
		last = c
		st.Attempts++
		created, err := p.createID(ctx, c)
		if err != nil {
			return 0, fmt.Errorf("creating %q (if the write went through, the next claim finds it): %w", vppnode.Key(c), err)
		}
		if created {
			return c, nil
		}
		st.Conflicts++
		lostSinceListing++
		view.markTaken(c)
		p.Log.Debug("node ID taken meanwhile", "node", p.name, "candidate", c, "attempt", st.Attempts)
	}
}

// idBound is the largest node ID a claim may take: Deps.MaxNodeID, or
// math.MaxUint32 without one (or when it returns 0).
func (p *Plugin) idBound() uint32 {
	if p.MaxNodeID != nil {
		if b := p.MaxNodeID(); b > 0 {
			return b
		}
	}
	return math.MaxUint32
}

// createID creates the record of id naming this node if it is absent, and
// in the same transaction points this node's index at id.
func (p *Plugin) createID(ctx context.Context, id uint32) (bool, error) {
	value, err := codec.Marshal(&vppnode.VppNode{Id: id, Name: p.name})
	if err != nil {
		return false, err
	}
	key := recordKey(id)
	return p.DB.Txn(ctx, []kvdb.Cmp{kvdb.IfAbsent(key)}, []kvdb.Op{
		kvdb.PutOp(key, value),
		kvdb.PutOp(p.indexKey(), []byte(strconv.FormatUint(uint64(id), 10))),
	})
}

// listIDs lists allocatedIDs/ in etcd, at store revision rev. The IDs
// come from the keys; a value is decoded only when it may name this node
// (mayName).
func (p *Plugin) listIDs(ctx context.Context) (l idListing, rev int64, err error) {
	kvs, rev, err := p.broker.List(ctx, vppnode.KeyPrefix)
	if err != nil {
		return idListing{}, 0, err
	}
	l = idListing{taken: make([]uint32, 0, len(kvs)), ownRec: map[uint32]*vppnode.VppNode{}, listed: len(kvs)}
	for _, kv := range kvs {
		id, err := vppnode.ParseKey(kv.Key)
		if err != nil {
			p.Log.Warn("skipping an invalid node ID key", "key", kv.Key, "err", err)
			continue
		}
		l.taken = append(l.taken, id)
		if !mayName(kv.Value, p.name) {
			continue
		}
		l.decoded++
		rec := new(vppnode.VppNode)
		if err := codec.Unmarshal(kv.Value, rec); err != nil {
			p.Log.Warn("undecodable node ID record; its ID stays taken", "key", kv.Key, "err", err)
			continue
		}
		if rec.GetName() == p.name {
			l.own = append(l.own, id)
			l.ownRec[id] = rec
		}
	}
	slices.Sort(l.taken)
	l.taken = slices.Compact(l.taken)
	slices.Sort(l.own)
	if len(l.own) > 1 {
		p.Log.Warn("several node ID records name this node; keeping the smallest ID, leaving the others",
			"node", p.name, "ids", l.own)
	}
	return l, rev, nil
}

// mayName reports whether the JSON record value may name the node name:
// false only when name's bytes do not occur in value and value holds no
// escape (a backslash). A JSON string without escapes holds its text
// verbatim, so a record that names name and has no escape contains those
// bytes; anything else (an escaped or undecodable value) is decoded.
func mayName(value []byte, name string) bool {
	return bytes.Contains(value, []byte(name)) || bytes.IndexByte(value, '\\') >= 0
}

func (p *Plugin) setClaimStats(st claimStats) {
	p.mu.Lock()
	p.stats = st
	p.mu.Unlock()
}

// lastClaimStats returns the counts of the last claim.
func (p *Plugin) lastClaimStats() claimStats {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.stats
}
