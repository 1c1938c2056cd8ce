package nodesync

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/infra/config"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// NodeIDKey is the LocalDB key of the node ID this node last ran with
// (decimal). Only the event loop writes it.
const NodeIDKey = "/contiv-agent/nodesync/node-id"

// localIDTimeout bounds one LocalDB request.
const localIDTimeout = 10 * time.Second

// storedID is what LocalDB holds under NodeIDKey.
type storedID struct {
	found bool
	id    uint32 // 0 when the value is not a node ID
	raw   string
}

// String is the ID, or the raw value quoted when it is not an ID.
func (s storedID) String() string {
	if s.id != 0 {
		return strconv.FormatUint(uint64(s.id), 10)
	}
	return strconv.Quote(s.raw)
}

// loadStoredID reads NodeIDKey; found is false without LocalDB.
func (p *Plugin) loadStoredID(ctx context.Context) (storedID, error) {
	if p.LocalDB == nil {
		return storedID{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, localIDTimeout)
	defer cancel()
	kv, found, err := p.LocalDB.Get(ctx, NodeIDKey)
	if err != nil {
		return storedID{}, fmt.Errorf("reading the last node ID of node %q from the local DB (key %q): %w", p.name, NodeIDKey, err)
	}
	if !found {
		return storedID{}, nil
	}
	st := storedID{found: true, raw: string(kv.Value)}
	if id, err := strconv.ParseUint(strings.TrimSpace(st.raw), 10, 32); err == nil {
		st.id = uint32(id)
	}
	return st, nil
}

// adoptID checks id, obtained from source, against the stored ID st: equal,
// or nothing stored yet (it is stored then), is fine. A different (or
// unreadable) stored ID is never silent: it is logged at error level and
// counted, and unless AcceptNodeIDChange is set it is an error wrapping
// ErrNodeIDChanged that names both IDs and the way out; when accepted the
// new ID is stored.
func (p *Plugin) adoptID(st storedID, id uint32, source string) error {
	ctx := context.Background()
	if p.LocalDB == nil || (st.found && st.id == id) {
		return nil
	}
	if !st.found {
		return p.storeID(ctx, id)
	}
	if !p.cfg.AcceptNodeIDChange {
		p.metrics.idChanges.WithLabelValues(changeRefused).Inc()
		p.Log.Error("node ID changed since the last run; the agent stays unready", "node", p.name,
			"last-node-id", st.String(), "new-node-id", id, "source", source, "accept-flag", "-"+AcceptNodeIDChangeFlag)
		return p.idChangeError(st, id, source)
	}
	p.metrics.idChanges.WithLabelValues(changeAccepted).Inc()
	p.Log.Error("node ID changed since the last run; accepted by -"+AcceptNodeIDChangeFlag, "node", p.name,
		"last-node-id", st.String(), "new-node-id", id, "source", source)
	return p.storeID(ctx, id)
}

// idChangeError names both IDs, where they come from and the ways out.
func (p *Plugin) idChangeError(st storedID, id uint32, source string) error {
	msg := fmt.Sprintf("node %q last ran with node ID %s (local DB key %q) but %s gives it ID %d; "+
		"its subnets and stored pod allocations belong to the old ID, so the agent stays unready. "+
		"To accept ID %d (and release the pod allocations outside its subnet), restart once with -%s (env %s=true)",
		p.name, st, NodeIDKey, source, id, id, AcceptNodeIDChangeFlag, config.EnvName(AcceptNodeIDChangeFlag))
	if st.id != 0 {
		msg += fmt.Sprintf("; to keep ID %d, make etcd key %s%s free and delete %s%s, then restart "+
			"(a free stored ID is taken back)", st.id, codec.KSRPrefix, vppnode.Key(st.id), codec.KSRPrefix, vppnode.Key(id))
	}
	return fmt.Errorf("%w: %s", ErrNodeIDChanged, msg)
}

// storeID writes id under NodeIDKey.
func (p *Plugin) storeID(ctx context.Context, id uint32) error {
	ctx, cancel := context.WithTimeout(ctx, localIDTimeout)
	defer cancel()
	if err := p.LocalDB.Put(ctx, NodeIDKey, []byte(strconv.FormatUint(uint64(id), 10))); err != nil {
		return fmt.Errorf("storing node ID %d of node %q in the local DB (key %q): %w", id, p.name, NodeIDKey, err)
	}
	return nil
}
