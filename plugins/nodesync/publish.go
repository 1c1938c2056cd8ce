package nodesync

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// PublishNodeIPs sets this node's VPP addresses of one IP version: the
// addresses of the other version are kept, those of this version are
// replaced by addresses (duplicates dropped; a nil Network means a host
// network). The vppnode record is written only when the set of
// "ip/prefix" strings changed, and only over a record that names this
// node: the record is read, then swapped on its mod revision (or created
// if absent). A record naming another node is a conflict: this node loses
// its ID (see loseID), a NodeIDCheck is pushed so that the event loop
// turns fatal, and the error is an api.FatalError wrapping
// ErrNodeIDConflict. Other errors: ErrNodeIDConflict recorded earlier,
// ErrNoDatabase, ErrNoNodeID, an address of the other version, and the
// store's error.
func (p *Plugin) PublishNodeIPs(addresses []*IPWithNetwork, version IPVersion) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("cannot publish the VPP addresses of node %q: "+format, append([]any{p.name}, args...)...)
	}
	if version != IPv4 && version != IPv6 {
		return fail("IP version %d is neither 4 nor 6", version)
	}
	if p.broker == nil {
		return fail("%w", ErrNoDatabase)
	}
	if err := p.lostError(); err != nil {
		return fail("%w", api.NewFatalError(err))
	}
	id := p.nodeID.Load()
	if id == 0 {
		return fail("%w", ErrNoNodeID)
	}
	given := make([]*IPWithNetwork, 0, len(addresses))
	for i, a := range addresses {
		if a == nil || a.Address == nil {
			return fail("address #%d is nil", i)
		}
		ip := normalizeIP(a.Address)
		if ipVersion(ip) != version {
			return fail("address %s is not IPv%d", a, version)
		}
		c := &IPWithNetwork{Address: ip, Network: copyNet(a.Network)}
		if c.Network == nil {
			c.Network = hostNetwork(ip)
		}
		c.Network.IP = normalizeIP(c.Network.IP)
		if !containsAddress(given, c) {
			given = append(given, c)
		}
	}

	p.publishMu.Lock()
	defer p.publishMu.Unlock()
	p.mu.RLock()
	var current []*IPWithNetwork
	if me := p.nodes[p.name]; me != nil {
		current = copyVppAddresses(me.VppIPAddresses)
	}
	p.mu.RUnlock()
	var next []*IPWithNetwork
	for _, a := range current {
		if ipVersion(a.Address) != version {
			next = append(next, a)
		}
	}
	for _, a := range given {
		if !containsAddress(next, a) {
			next = append(next, a)
		}
	}
	if sameVppAddresses(current, next) {
		return nil
	}

	rec := &vppnode.VppNode{Id: id, Name: p.name}
	for _, a := range next {
		rec.IpAddresses = append(rec.IpAddresses, a.String())
	}
	value, err := codec.Marshal(rec)
	if err != nil {
		return fail("%w", err)
	}
	key := vppnode.Key(id)
	if err := p.putOwnRecord(context.Background(), id, value, true); errors.Is(err, ErrNodeIDConflict) {
		fatal := p.loseID(conflictID, err)
		p.pushCheck("PublishNodeIPs found node ID " + strconv.FormatUint(uint64(id), 10) + " held by another node")
		return fail("%w", fatal)
	} else if err != nil {
		return fail("writing %q: %w", key, err)
	}
	p.mu.Lock()
	me := p.nodes[p.name]
	if me == nil {
		me = &Node{ID: id, Name: p.name}
		p.nodes[p.name] = me
	}
	me.VppIPAddresses = next
	p.published = true
	p.mu.Unlock()
	p.Log.Info("published VPP addresses", "node", p.name, "node-id", id, "version", int(version),
		"addresses", rec.IpAddresses)
	return nil
}
