package nodesync

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
)

// InstanceKey is the LocalDB key of this bolt file's instance: a random
// ID created once, the first time the file serves a presence claim, and
// carried in every presence value written by an agent on that file (see
// Holder.Instance). Only the event loop writes it.
//
// The bolt plugin holds an exclusive lock on its file while it runs, so
// an agent that holds the file with instance X and finds the presence key
// valued with X (but not with its own value) knows that the holder of
// that key cannot be alive: it is an earlier agent on this very file,
// killed before it could revoke its lease. That key is taken over at once
// instead of waited for (acquirePresence).
const InstanceKey = "/contiv-agent/nodesync/instance"

// instanceLen is the length of an instance: crypto/rand.Text, 26
// characters of the base32 alphabet (128 bits).
const instanceLen = 26

// loadInstance gives this process the instance of its bolt file (created
// and stored on first use) and puts it into its presence value. Without
// LocalDB, or when LocalDB fails, the value stays without an instance:
// the presence then works as before instances (a killed agent's key is
// waited for), and the failure is logged.
func (p *Plugin) loadInstance(ctx context.Context) {
	if p.LocalDB == nil || p.instance != "" {
		return
	}
	inst, err := p.localInstance(ctx)
	if err != nil {
		p.Log.Warn("no instance for this node's local DB: a restart after a kill will wait for the previous agent's presence to expire",
			"key", InstanceKey, "err", err)
		return
	}
	p.instance = inst
	p.identity = newIdentity(p.name, p.started, inst)
}

// localInstance reads InstanceKey, or stores a new instance there when
// it is absent or not an instance. The bolt store acknowledges a write
// once it is fsynced, so the instance is durable before any presence
// carries it.
func (p *Plugin) localInstance(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, localIDTimeout)
	defer cancel()
	kv, found, err := p.LocalDB.Get(ctx, InstanceKey)
	if err != nil {
		return "", fmt.Errorf("reading the instance from the local DB (key %q): %w", InstanceKey, err)
	}
	if found && validInstance(string(kv.Value)) {
		return string(kv.Value), nil
	}
	if found {
		p.Log.Warn("replacing an invalid instance in the local DB", "key", InstanceKey, "value", string(kv.Value))
	}
	inst := rand.Text()
	if err := p.LocalDB.Put(ctx, InstanceKey, []byte(inst)); err != nil {
		return "", fmt.Errorf("storing a new instance in the local DB (key %q): %w", InstanceKey, err)
	}
	p.Log.Info("new instance stored in the local DB", "key", InstanceKey, "instance", inst)
	return inst, nil
}

// validInstance tells whether s is what crypto/rand.Text returns.
func validInstance(s string) bool {
	return len(s) == instanceLen && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") == ""
}

// sameInstance tells whether the presence value holder was written by
// an agent on this process's bolt file: it carries this process's
// instance. Values that do not decode, and values of agents that predate
// instances, carry none.
func (p *Plugin) sameInstance(holder []byte) bool {
	if p.instance == "" {
		return false
	}
	var h Holder
	if err := json.Unmarshal(holder, &h); err != nil {
		return false
	}
	return h.Instance == p.instance
}
