package nodesync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// PresencePrefix is where agents record that they serve a node name:
// PresencePrefix + <node name>, bound to a lease, valued with the holder
// (see Holder). It is outside the KSR prefix on purpose: the controller
// watches that prefix and would log every presence key as unknown.
// contiv-ksr reads it too (it never frees the ID of a node whose agent is
// present), so it is defined beside the node-ID model.
const PresencePrefix = vppnode.PresencePrefix

const (
	// stalePoll is how often a claim blocked by another holder's presence
	// looks again once that presence should have expired.
	stalePoll = 500 * time.Millisecond
	// staleMargin is how long past the holder's remaining TTL (as first
	// seen) the key may outlive a dead holder: etcd reaps expired leases
	// in rounds.
	staleMargin = 2 * time.Second
	// releaseTimeout bounds the revoke of Close.
	releaseTimeout = 5 * time.Second
)

// Holder is the value of a presence key: which process serves the node.
// It is JSON, for people reading etcd; agents compare values as bytes and
// decode only Instance.
type Holder struct {
	Node    string `json:"node"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Started string `json:"started"`
	// Instance is the instance of the holder's bolt file (InstanceKey);
	// absent without LocalDB and in values of agents that predate it.
	Instance string `json:"instance,omitempty"`
}

// newIdentity is this process's presence value; instance "" leaves it
// out.
func newIdentity(node string, started time.Time, instance string) []byte {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	value, _ := json.Marshal(Holder{Node: node, Host: host, PID: os.Getpid(), Started: started.UTC().Format(time.RFC3339Nano),
		Instance: instance})
	return value
}

// ensurePresence makes sure this agent holds its presence key: a live
// lease whose key still holds this agent's value is kept; otherwise the
// presence is claimed again (a key still holding this agent's value is
// taken over) and the old lease is revoked. Before the first claim of the
// process the bolt file's instance is loaded (loadInstance), and only that
// first claim takes over a key of an earlier agent on the same file.
// Errors wrapping ErrNodeNameTaken mean another live agent serves this
// node name; others are transient.
func (p *Plugin) ensurePresence(ctx context.Context) error {
	if p.Presence == nil {
		return nil
	}
	old := p.presence()
	if old != nil && !closed(old.Lost()) {
		held, err := p.stillHeld(ctx)
		if err != nil || held {
			return err
		}
		p.Log.Warn("presence key gone or changed while its lease is alive; claiming it again", "key", p.presenceKey)
	}
	first := old == nil
	if first {
		p.loadInstance(ctx)
	}
	if err := p.acquirePresence(ctx, first); err != nil {
		return err
	}
	if old != nil {
		if err := old.Release(ctx); err != nil {
			p.Log.Debug("revoking the previous presence lease failed; it expires by itself", "err", err)
		}
	}
	return nil
}

// stillHeld reads the presence key: true when it holds this agent's value.
func (p *Plugin) stillHeld(ctx context.Context) (bool, error) {
	if p.DB == nil {
		return true, nil
	}
	kv, found, err := p.DB.Get(ctx, p.presenceKey)
	if err != nil {
		return false, fmt.Errorf("reading presence key %q: %w", p.presenceKey, err)
	}
	return found && bytes.Equal(kv.Value, p.identity), nil
}

// acquirePresence claims the presence key. A key held by another agent is
// waited for, at most its remaining TTL (as first seen) plus staleMargin:
// the key of a dead agent vanishes by then, a live agent keeps it, and the
// claim then fails with ErrNodeNameTaken naming the holder. On the first
// claim of this process (first), a key that carries this process's
// instance is the key of an earlier agent on this bolt file, which cannot
// be alive while this process holds the file: it is taken over at once,
// at the revision it was read at (once: if it changed meanwhile, the new
// holder is waited for like any other).
func (p *Plugin) acquirePresence(ctx context.Context, first bool) error {
	var deadline time.Time
	takeOver := first
	var previous []byte // the value being taken over, nil if none
	pres, err := p.Presence.ClaimPresence(ctx, p.presenceKey, p.identity, p.cfg.PresenceTTL)
	for {
		if err == nil {
			p.setPresence(pres)
			if previous != nil {
				p.Log.Info("presence taken over from this node's previous agent: it ran on this local DB, so it is dead",
					"node", p.name, "key", p.presenceKey, "previous", string(previous), "instance", p.instance)
			}
			p.Log.Info("presence claimed: this agent serves the node name", "node", p.name, "key", p.presenceKey,
				"ttl", p.cfg.PresenceTTL, "holder", string(p.identity))
			return nil
		}
		var held *kvdb.PresenceHeldError
		if !errors.As(err, &held) {
			return fmt.Errorf("cannot check that no other agent serves node %q: %w", p.name, err)
		}
		same := p.sameInstance(held.Holder)
		if same && takeOver {
			takeOver, previous = false, held.Holder
			pres, err = p.Presence.TakeOverPresence(ctx, p.presenceKey, p.identity, p.cfg.PresenceTTL, held.Revision)
			continue
		}
		if previous != nil {
			p.Log.Info("the presence changed before it could be taken over; waiting for its new holder",
				"node", p.name, "previous", string(previous), "holder", string(held.Holder))
			previous = nil
		}
		if same {
			// Not an earlier agent that this claim replaced: a late write
			// of a killed agent (its lease expires), or a copy of this
			// bolt file running elsewhere (it keeps its lease).
			p.Log.Warn("the presence carries this local DB's instance but not this process's value; waiting for it like any other holder",
				"node", p.name, "holder", string(held.Holder), "instance", p.instance)
		}
		now := time.Now()
		if deadline.IsZero() && held.TTL >= 0 {
			deadline = now.Add(held.TTL + staleMargin)
		}
		if held.TTL < 0 || !now.Before(deadline) {
			return fmt.Errorf("%w: node name %q is served by another live agent %s (etcd key %s); "+
				"this agent refuses to serve it too", ErrNodeNameTaken, p.name, held.Holder, held.Key)
		}
		wait := min(held.TTL+stalePoll, deadline.Sub(now))
		p.Log.Warn("another agent holds this node name; waiting for its presence to expire",
			"node", p.name, "holder", string(held.Holder), "ttl", held.TTL, "wait", wait)
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("waiting for the presence of %s on node %q to expire: %w", held.Holder, p.name, err)
		}
		pres, err = p.Presence.ClaimPresence(ctx, p.presenceKey, p.identity, p.cfg.PresenceTTL)
	}
}

// presence returns the current presence, nil if none.
func (p *Plugin) presence() kvdb.Presence {
	p.presMu.Lock()
	defer p.presMu.Unlock()
	return p.pres
}

// setPresence installs pres and wakes the keeper.
func (p *Plugin) setPresence(pres kvdb.Presence) {
	p.presMu.Lock()
	p.pres = pres
	p.presMu.Unlock()
	select {
	case p.presSet <- struct{}{}:
	default:
	}
}

// releasePresence revokes the current presence, if any; a failure is
// logged (the lease then expires by itself).
func (p *Plugin) releasePresence(ctx context.Context) {
	p.presMu.Lock()
	pres := p.pres
	p.pres = nil
	p.presMu.Unlock()
	if pres == nil {
		return
	}
	if err := pres.Release(ctx); err != nil {
		p.Log.Warn("releasing the presence failed; it expires after its TTL", "key", pres.Key(),
			"ttl", p.cfg.PresenceTTL, "err", err)
	}
}

// keep runs until ctx ends: each time the current presence is lost, it
// asks the event loop for a NodeIDCheck, which claims it again or turns
// the agent fatal.
func (p *Plugin) keep(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.presSet:
		}
		cur := p.presence()
		if cur == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-cur.Lost():
		}
		if p.presence() != cur {
			continue // replaced by the event loop meanwhile
		}
		p.Log.Warn("presence lease lost; asking the event loop to check the node name and ID again", "key", p.presenceKey)
		p.pushCheck("presence lease lost")
	}
}

// closed tells whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
