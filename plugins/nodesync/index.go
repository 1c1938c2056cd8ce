package nodesync

import (
	"context"
	"strconv"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
)

// IndexPrefix is where agents record which node ID a node name holds:
// IndexPrefix + <node name>, valued with the ID in decimal. The claim
// writes it in the transaction that creates the record, and after finding
// its record by a listing. It is a hint, never the truth: the record
// allocatedIDs/<id> is, so the index is believed only when that record
// names the node. It is outside the KSR prefix for the same reason as
// the presence keys (the controller would log it as unknown), and nothing
// deletes it: contiv-ksr frees an ID by deleting its record, which leaves
// the index of the gone node stale (ignored, then overwritten by the
// node's next claim).
const IndexPrefix = "/vnf-agent/contiv-nodesync/node-id/"

// Ways a claim found this node's record (claimStats.FoundBy).
const (
	foundByStored  = "stored ID"
	foundByIndex   = "index"
	foundByListing = "listing"
)

// indexKey is this node's index key.
func (p *Plugin) indexKey() string { return IndexPrefix + p.name }

// recordKey is the full key of the record of id.
func recordKey(id uint32) string { return codec.KSRPrefix + vppnode.Key(id) }

// lookup is what findOwn learnt: this node's record, or a view to claim
// from.
type lookup struct {
	id      uint32
	rec     *vppnode.VppNode // nil when not found
	listing idListing        // the fallback listing, when it ran
	active  int              // activity between the index read and the listing
}

// findOwn looks for this node's record without listing when it can: the
// record of the stored ID (preferred), then the record the index points
// at; each counts only when it names this node. Otherwise it lists
// allocatedIDs/ (records of agents that predate the index have none), and
// a record found so is indexed (best effort). Errors are the store's.
func (p *Plugin) findOwn(ctx context.Context, preferred uint32, st *claimStats) (lookup, error) {
	if preferred != 0 {
		rec, err := p.ownRecord(ctx, preferred, st)
		if err != nil || rec != nil {
			st.FoundBy = foundByStored
			return lookup{id: preferred, rec: rec}, err
		}
	}
	kvs, revFrom, err := p.DB.List(ctx, p.indexKey())
	st.Reads++
	if err != nil {
		return lookup{}, err
	}
	indexed := p.indexedID(kvs)
	if indexed != 0 && indexed != preferred {
		rec, err := p.ownRecord(ctx, indexed, st)
		if err != nil || rec != nil {
			st.FoundBy = foundByIndex
			return lookup{id: indexed, rec: rec}, err
		}
	}
	if indexed != 0 {
		p.Log.Info("stale node ID index ignored: the record of its ID does not name this node",
			"node", p.name, "key", p.indexKey(), "node-id", indexed)
	}
	l, revTo, err := p.listIDs(ctx)
	st.Listings++
	st.Listed += l.listed
	st.Decoded += l.decoded
	if err != nil {
		return lookup{}, err
	}
	out := lookup{listing: l, active: activity(revFrom, revTo)}
	if len(l.own) > 0 {
		st.FoundBy = foundByListing
		out.id = l.own[0]
		out.rec = l.ownRec[out.id]
		p.writeIndex(ctx, out.id)
	}
	return out, nil
}

// indexedID is the ID of this node's index key among kvs (a listing of
// that key, which may hold the keys of longer names too); 0 if absent or
// not an ID.
func (p *Plugin) indexedID(kvs []kvdb.KeyValue) uint32 {
	for _, kv := range kvs {
		if kv.Key != p.indexKey() {
			continue
		}
		id, err := strconv.ParseUint(string(kv.Value), 10, 32)
		if err != nil || id == 0 {
			p.Log.Warn("ignoring a node ID index that is not an ID", "key", kv.Key, "value", string(kv.Value))
			return 0
		}
		return uint32(id)
	}
	return 0
}

// ownRecord reads the record of id: it is returned when it names this
// node, nil when it is absent, names another node or does not decode.
func (p *Plugin) ownRecord(ctx context.Context, id uint32, st *claimStats) (*vppnode.VppNode, error) {
	kv, found, err := p.broker.Get(ctx, vppnode.Key(id))
	st.Reads++
	if err != nil || !found {
		return nil, err
	}
	rec := new(vppnode.VppNode)
	if codec.Unmarshal(kv.Value, rec) != nil || rec.GetName() != p.name {
		return nil, nil // not this node's record: the lookup goes on
	}
	return rec, nil
}

// writeIndex points this node's index at id; a failure is logged (the
// next claim lists again).
func (p *Plugin) writeIndex(ctx context.Context, id uint32) {
	if err := p.DB.Put(ctx, p.indexKey(), []byte(strconv.FormatUint(uint64(id), 10))); err != nil {
		p.Log.Warn("cannot write the node ID index; the next claim lists the IDs again", "key", p.indexKey(), "err", err)
	}
}
