package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// Claim records the CIDRs handed to a node before the node is patched with
// them. It lives only while the patch is pending: a leader that takes over
// (or a restarted one) finds the CIDRs handed out but not yet on a Node in
// the claims, so it neither hands them out again nor loses them.
//
// With agents (Params.Agents) the record of a node also keeps its fence:
// the CIDRs of a deleted Node of that name that its agent may still use
// (Fenced), so that a leader that takes over keeps them fenced too.
type Claim struct {
	Node  string   `json:"node"`
	UID   string   `json:"uid"`
	CIDRs []string `json:"cidrs"`
	// Fenced are the CIDRs of a deleted Node of this name, kept from
	// every other node while its agent may still hold addresses in them.
	Fenced []string `json:"fenced,omitempty"`
}

// Ledger keeps the claims. Implementations are safe for concurrent use.
type Ledger interface {
	// List returns every claim, sorted by node.
	List(ctx context.Context) ([]Claim, error)
	// Put records c (replacing the node's claim); an error wrapping
	// ErrLostLead means that this replica may no longer write.
	Put(ctx context.Context, c Claim) error
	// Delete removes the node's claim (none is fine).
	Delete(ctx context.Context, node string) error
}

// MemLedger is a Ledger in memory (tests, and a single replica that needs
// no failover).
type MemLedger struct {
	mu     sync.Mutex
	claims map[string]Claim
}

var _ Ledger = (*MemLedger)(nil)

// NewMemLedger returns an empty MemLedger.
func NewMemLedger() *MemLedger { return &MemLedger{claims: make(map[string]Claim)} }

// List implements Ledger.
func (m *MemLedger) List(context.Context) ([]Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Claim, 0, len(m.claims))
	for _, c := range m.claims {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// Put implements Ledger.
func (m *MemLedger) Put(_ context.Context, c Claim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims[c.Node] = c
	return nil
}

// Delete implements Ledger.
func (m *MemLedger) Delete(_ context.Context, node string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims, node)
	return nil
}

// EtcdLedger keeps the claims in etcd under Prefix, one key per node
// (<Prefix><path-escaped node name>, JSON). Every write carries Fence, so
// a replica that lost the lead cannot write. The writes of concurrent
// workers are committed together (a groupWriter): one transaction, one
// round trip and one fsync per group. It must not be copied once used.
type EtcdLedger struct {
	DB     kvdb.Broker
	Prefix string
	// Fence returns the compares of the leadership; nil writes unfenced.
	Fence func() []kvdb.Cmp

	group groupWriter
}

var _ Ledger = (*EtcdLedger)(nil)

// List implements Ledger.
func (e *EtcdLedger) List(ctx context.Context) ([]Claim, error) {
	kvs, _, err := e.DB.List(ctx, e.Prefix)
	if err != nil {
		return nil, fmt.Errorf("list claims under %s: %w", e.Prefix, err)
	}
	out := make([]Claim, 0, len(kvs))
	for _, kv := range kvs {
		var c Claim
		if err := json.Unmarshal(kv.Value, &c); err != nil || c.Node == "" {
			return nil, fmt.Errorf("claim %s: not a claim (%q)", kv.Key, kv.Value)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// Put implements Ledger.
func (e *EtcdLedger) Put(ctx context.Context, c Claim) error {
	value, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return e.write(ctx, "record", c.Node, kvdb.PutOp(e.key(c.Node), value))
}

// Delete implements Ledger.
func (e *EtcdLedger) Delete(ctx context.Context, node string) error {
	return e.write(ctx, "delete", node, kvdb.DeleteOp(e.key(node)))
}

func (e *EtcdLedger) write(ctx context.Context, what, node string, op kvdb.Op) error {
	return e.group.write(ctx, e.DB, e.Fence, e.key(node), op, fmt.Sprintf("%s the claim of node %s", what, node))
}

// fencedWrite applies op in a transaction that carries fence (none when
// nil); a refused transaction wraps ErrLostLead. Errors start with the
// formatted description of the write.
func fencedWrite(ctx context.Context, db kvdb.Broker, fence func() []kvdb.Cmp, op kvdb.Op, format string, args ...any) error {
	var cmps []kvdb.Cmp
	if fence != nil {
		cmps = fence()
	}
	ok, err := db.Txn(ctx, cmps, []kvdb.Op{op})
	switch {
	case err != nil:
		return fmt.Errorf(format+": %w", append(args, err)...)
	case !ok:
		return fmt.Errorf(format+": %w", append(args, ErrLostLead)...)
	}
	return nil
}

// key is the claim's key: node names are DNS subdomains, escaped anyway.
func (e *EtcdLedger) key(node string) string {
	return strings.TrimSuffix(e.Prefix, "/") + "/" + url.PathEscape(node)
}
