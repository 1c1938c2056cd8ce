package nodesync

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// ownRecordRounds bounds the read-then-swap rounds of one write of this
// node's record: a round is lost only when the record changed in between.
const ownRecordRounds = 5

// reassert checks that this node still holds its name and its ID after
// why (a gap, a deletion): the presence is ensured, then the ID record is
// created if absent (same ID and name, this node's addresses) or must
// still name this node. A conflict is returned as the api.FatalError of
// loseID. Any other error (etcd unreachable) leaves the re-assert pending,
// to be retried at the next resync, and is returned as it is.
func (p *Plugin) reassert(why string) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.claimTimeout())
	defer cancel()
	err := p.ensurePresence(ctx)
	if err == nil {
		err = p.reassertRecord(ctx)
	}
	switch {
	case err == nil:
		if p.pending {
			p.Log.Info("node ID re-asserted after a failed attempt", "node", p.name, "node-id", p.nodeID.Load(), "after", why)
		}
		p.pending = false
		return nil
	case errors.Is(err, ErrNodeIDConflict):
		return p.loseID(conflictID, err)
	case errors.Is(err, ErrNodeNameTaken):
		return p.loseID(conflictName, err)
	}
	p.pending = true
	p.Log.Warn("cannot re-assert this node's ID now; retrying at the next resync",
		"node", p.name, "node-id", p.nodeID.Load(), "after", why, "err", err)
	return fmt.Errorf("re-asserting node ID %d of node %q after %s: %w", p.nodeID.Load(), p.name, why, err)
}

// reassertRecord creates this node's record if it is absent and checks
// that it names this node.
func (p *Plugin) reassertRecord(ctx context.Context) error {
	if p.broker == nil {
		return ErrNoDatabase
	}
	id := p.nodeID.Load()
	rec := &vppnode.VppNode{Id: id, Name: p.name}
	p.mu.RLock()
	if me := p.nodes[p.name]; me != nil {
		for _, a := range me.VppIPAddresses {
			rec.IpAddresses = append(rec.IpAddresses, a.String())
		}
	}
	p.mu.RUnlock()
	value, err := codec.Marshal(rec)
	if err != nil {
		return err
	}
	return p.putOwnRecord(ctx, id, value, false)
}

// putOwnRecord makes the record of id hold value where it may: it creates
// the record if absent (compare: absent) and, with swap, replaces a record
// naming this node (compare: its mod revision); without swap such a record
// is left as it is. A record naming another node, or that does not
// decode, is an error wrapping ErrNodeIDConflict; nothing is written then.
func (p *Plugin) putOwnRecord(ctx context.Context, id uint32, value []byte, swap bool) error {
	key := vppnode.Key(id)
	for range ownRecordRounds {
		kv, found, err := p.broker.Get(ctx, key)
		if err != nil {
			return err
		}
		cmp := kvdb.IfAbsent(key)
		if found {
			if err := p.checkHolder(id, kv.Value); err != nil {
				return err
			}
			if !swap || bytes.Equal(kv.Value, value) {
				return nil
			}
			cmp = kvdb.IfModRevision(key, kv.Revision)
		}
		done, err := p.broker.Txn(ctx, []kvdb.Cmp{cmp}, []kvdb.Op{kvdb.PutOp(key, value)})
		if err != nil || done {
			return err
		}
		p.Log.Debug("own record changed between read and write; reading again", "key", key)
	}
	return fmt.Errorf("record %q changed during each of %d read-and-swap rounds", key, ownRecordRounds)
}

// checkHolder returns a conflict error unless value is a record naming
// this node.
func (p *Plugin) checkHolder(id uint32, value []byte) error {
	rec := new(vppnode.VppNode)
	if err := codec.Unmarshal(value, rec); err != nil {
		return p.conflictError(id, fmt.Sprintf("an undecodable record (%v)", err))
	}
	if rec.GetName() != p.name {
		return p.conflictError(id, fmt.Sprintf("node %q", rec.GetName()))
	}
	return nil
}

// conflictError names this node, its ID, the holder and the key.
func (p *Plugin) conflictError(id uint32, holder string) error {
	return fmt.Errorf("%w: node ID %d of node %q is held by %s (etcd key %s%s); "+
		"this agent stops rather than share the ID and its subnets",
		ErrNodeIDConflict, id, p.name, holder, codec.KSRPrefix, vppnode.Key(id))
}

// loseID records that this node no longer holds its ID or its name:
// GetNodeID returns 0 from now on, the registry forgets this node's ID and
// every later resync fails with err. It counts the conflict (kind), logs
// it and returns err as an api.FatalError. Safe from any goroutine; the
// first cause is kept.
func (p *Plugin) loseID(kind string, err error) error {
	p.lost.CompareAndSwap(nil, &err)
	id := p.nodeID.Swap(0)
	p.mu.Lock()
	if me := p.nodes[p.name]; me != nil {
		me.ID = 0
	}
	p.mu.Unlock()
	p.metrics.conflicts.WithLabelValues(kind).Inc()
	p.Log.Error("this agent no longer holds its node ID or node name: it turns fatal",
		"node", p.name, "node-id", id, "err", err)
	return api.NewFatalError(err)
}

// ownRecordChanged handles the deletion of this node's record, or its
// overwrite with another node's: the claim is re-asserted at once.
func (p *Plugin) ownRecordChanged(ksc *api.KubeStateChange) (string, error) {
	what := "deleted"
	if ksc.NewValue != nil {
		what = "overwritten"
	}
	if err := p.reassert(fmt.Sprintf("its record %s was %s", ksc.Key, what)); err != nil {
		return "", err
	}
	return fmt.Sprintf("own record %s %s: re-asserted for node %s", ksc.Key, what, p.name), nil
}

// recheck handles a NodeIDCheck.
func (p *Plugin) recheck(chk *NodeIDCheck) (string, error) {
	if err := p.lostError(); err != nil {
		return "", api.NewFatalError(err)
	}
	if p.nodeID.Load() == 0 {
		return "no node ID yet: nothing to check", nil
	}
	if err := p.reassert(chk.Reason); err != nil {
		return "", err
	}
	return fmt.Sprintf("node %s holds node ID %d and its node name", p.name, p.nodeID.Load()), nil
}

// pushCheck asks the event loop for a NodeIDCheck; a failure is logged.
func (p *Plugin) pushCheck(reason string) {
	if p.EventLoop == nil {
		p.Log.Error("cannot ask for a node ID check: no event loop", "reason", reason)
		return
	}
	if err := p.EventLoop.PushEvent(&NodeIDCheck{Reason: reason}); err != nil {
		p.Log.Error("cannot ask for a node ID check", "reason", reason, "err", err)
	}
}
