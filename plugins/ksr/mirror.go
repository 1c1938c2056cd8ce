package ksr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
)

// errLostLead is returned when a fenced write was refused: another
// replica leads (or the leader key is gone), so this one must stop
// writing.
var errLostLead = errors.New("ksr: leadership lost (a fenced write was refused)")

// Kinds of fix a resync counts.
const (
	fixAdded   = "added"   // a key etcd lacked was written
	fixUpdated = "updated" // a key etcd held with another value was rewritten
	fixDeleted = "deleted" // a key the API does not have was deleted
)

// Fixes counts what one resync changed in etcd, by resource keyword and
// kind of fix.
type Fixes map[string]map[string]int

// Total is the number of keys fixed.
func (f Fixes) Total() int {
	n := 0
	for _, kinds := range f {
		for _, c := range kinds {
			n += c
		}
	}
	return n
}

func (f Fixes) add(resource, kind string) {
	if f[resource] == nil {
		f[resource] = make(map[string]int)
	}
	f[resource][kind]++
}

// change is one write the mirror makes: a put (value != nil) or a delete.
type change struct {
	res   *resource
	key   string // relative to codec.KSRPrefix
	value []byte // nil: delete
	fix   string // the kind of fix (resync only)
}

// mirror keeps etcd equal to the informers' stores. It is owned by the
// loop goroutine: nothing else reads or writes it.
type mirror struct {
	db      kvdb.Broker // etcd, full keys
	res     []*resource
	metrics *ksrMetrics
	log     *slog.Logger

	// held is what etcd holds under the mirrored prefixes (relative key
	// -> value), as the last resync listed it and the writes since then
	// left it; nil until a resync succeeds, and nil again after a write
	// whose outcome is unknown.
	held map[string][]byte
	// keysOf indexes held by object: the keys of each (a pod has one per
	// layout written, and its per-node key names its node, which the
	// store no longer tells once the pod is gone). Kept with held.
	keysOf map[dirtyKey][]string
}

// valid reports whether held can be trusted (else a resync must run).
func (m *mirror) valid() bool { return m.held != nil }

// resync makes etcd equal to the stores: it lists every mirrored prefix,
// writes the keys etcd lacks or holds with another value, and deletes the
// keys the stores do not have (mark and sweep).
func (m *mirror) resync(ctx context.Context, fence kvdb.Cmp) (Fixes, error) {
	m.held, m.keysOf = nil, nil
	held := make(map[string][]byte)
	var changes []change
	for _, r := range m.res {
		var kvs []kvdb.KeyValue
		for _, prefix := range r.prefixes {
			part, _, err := m.db.List(ctx, codec.KSRPrefix+prefix)
			if err != nil {
				return nil, fmt.Errorf("ksr: resync %s: %w", r.keyword, err)
			}
			kvs = append(kvs, part...)
		}
		want, errs := r.desired()
		for _, err := range errs {
			m.log.Error("object left out of the mirror", "resource", r.keyword, "err", err)
		}
		changes = append(changes, diff(r, kvs, want, held)...)
	}
	m.held, m.keysOf = held, make(map[dirtyKey][]string, len(held))
	for key := range held {
		m.index(key, true)
	}
	fixes := make(Fixes)
	if err := m.apply(ctx, fence, changes); err != nil {
		return nil, err
	}
	for _, c := range changes {
		fixes.add(c.res.keyword, c.fix)
	}
	return fixes, nil
}

// diff fills held with r's keys in etcd and returns the changes that make
// them equal to want.
func diff(r *resource, kvs []kvdb.KeyValue, want map[string][]byte, held map[string][]byte) []change {
	var out []change
	for _, kv := range kvs {
		key := kv.Key[len(codec.KSRPrefix):]
		held[key] = kv.Value
		if _, ok := want[key]; !ok {
			out = append(out, change{res: r, key: key, fix: fixDeleted})
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		cur, ok := held[key]
		switch {
		case !ok:
			out = append(out, change{res: r, key: key, value: want[key], fix: fixAdded})
		case !bytes.Equal(cur, want[key]):
			out = append(out, change{res: r, key: key, value: want[key], fix: fixUpdated})
		}
	}
	return out
}

// sync writes the objects marked dirty whose value differs from what etcd
// holds: a changed or new object is put at each of its keys, a gone
// object's keys deleted, and so is a key the object no longer has (a
// name reused on another node); an object whose mirrored fields did not
// change costs nothing. held must be valid.
func (m *mirror) sync(ctx context.Context, fence kvdb.Cmp, dirty map[dirtyKey]struct{}) error {
	var changes []change
	for d := range dirty {
		r := m.res[d.res]
		keys, val, err := r.lookup(d.storeKey)
		if err != nil {
			m.log.Error("object left out of the mirror", "resource", r.keyword, "object", d.storeKey, "err", err)
			continue
		}
		for _, key := range keys {
			if cur, held := m.held[key]; !held || !bytes.Equal(cur, val) {
				changes = append(changes, change{res: r, key: key, value: val})
			}
		}
		for _, key := range m.keysOf[d] {
			if !slices.Contains(keys, key) {
				changes = append(changes, change{res: r, key: key})
			}
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].key < changes[j].key })
	return m.apply(ctx, fence, changes)
}

// index adds key to keysOf (present) or removes it.
func (m *mirror) index(key string, present bool) {
	for i, r := range m.res {
		if !r.owns(key) {
			continue
		}
		sk, ok := r.storeKey(key)
		if !ok {
			return
		}
		d := dirtyKey{res: i, storeKey: sk}
		keys := slices.DeleteFunc(m.keysOf[d], func(k string) bool { return k == key })
		if present {
			keys = append(keys, key)
		}
		if len(keys) == 0 {
			delete(m.keysOf, d)
			return
		}
		m.keysOf[d] = keys
		return
	}
}

// owns tells whether key is under one of r's prefixes.
func (r *resource) owns(key string) bool {
	for _, p := range r.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// apply commits changes in fenced transactions of at most kvdb.MaxTxnOps
// operations each, updating held after each one. A refused fence is
// errLostLead; any other error leaves the outcome unknown, so held is
// dropped and the next step must be a resync.
func (m *mirror) apply(ctx context.Context, fence kvdb.Cmp, changes []change) error {
	for len(changes) > 0 {
		n := min(len(changes), kvdb.MaxTxnOps)
		batch := changes[:n]
		changes = changes[n:]
		ops := make([]kvdb.Op, len(batch))
		for i, c := range batch {
			if c.value == nil {
				ops[i] = kvdb.DeleteOp(codec.KSRPrefix + c.key)
			} else {
				ops[i] = kvdb.PutOp(codec.KSRPrefix+c.key, c.value)
			}
		}
		ok, err := m.db.Txn(ctx, []kvdb.Cmp{fence}, ops)
		if err != nil {
			m.held, m.keysOf = nil, nil
			return fmt.Errorf("ksr: write %d keys: %w", len(ops), err)
		}
		if !ok {
			m.held, m.keysOf = nil, nil
			return errLostLead
		}
		m.applied(batch)
	}
	return nil
}

// applied records committed changes in held and in the metrics.
func (m *mirror) applied(batch []change) {
	for _, c := range batch {
		m.index(c.key, c.value != nil)
		if c.value == nil {
			delete(m.held, c.key)
			m.metrics.writes.WithLabelValues(c.res.keyword, "delete").Inc()
			continue
		}
		m.held[c.key] = c.value
		m.metrics.writes.WithLabelValues(c.res.keyword, "put").Inc()
	}
}

// counts returns the number of objects held per resource keyword (a pod
// written in two layouts counts once).
func (m *mirror) counts() map[string]int {
	out := make(map[string]int, len(m.res))
	for _, r := range m.res {
		out[r.keyword] = 0
	}
	for d := range m.keysOf {
		out[m.res[d.res].keyword]++
	}
	return out
}
