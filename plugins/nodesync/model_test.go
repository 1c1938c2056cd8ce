package nodesync_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ksr/model/codec"
	"github.com/contiv-ipam/agent/plugins/ksr/model/vppnode"
	"github.com/contiv-ipam/agent/plugins/nodesync"
)

// errUnknown is a request whose outcome the client does not know (a
// timeout): it may have been applied.
var errUnknown = errors.New("model: request timed out, outcome unknown")

// memStore is an in-memory kvdb.Store: every request is atomic under one
// mutex, revisions count the writes, and faults are injected: before a
// request a goroutine may yield (random interleavings), and a request may
// fail before it is applied, or after (errUnknown). Watch is not served.
type memStore struct {
	kvdb.Store
	mu    sync.Mutex
	rnd   *rand.Rand
	fault float64 // probability of a failure, half of them after applying
	rev   int64
	kvs   map[string]kvdb.KeyValue
}

var _ kvdb.Store = (*memStore)(nil)

func newMemStore(seed uint64, fault float64) *memStore {
	return &memStore{rnd: rand.New(rand.NewPCG(seed, 1)), fault: fault, kvs: map[string]kvdb.KeyValue{}}
}

func (m *memStore) NewBroker(prefix string) kvdb.Broker { return kvdb.WithPrefix(m, prefix) }
func (m *memStore) String() string                      { return "mem" }

// enter yields at random, then locks; it returns whether to fail before
// and after applying.
func (m *memStore) enter() (before, after bool) {
	m.mu.Lock()
	yield := m.rnd.IntN(2) == 0
	f := m.rnd.Float64()
	m.mu.Unlock()
	if yield {
		runtime.Gosched()
	}
	m.mu.Lock()
	return f < m.fault/2, f >= m.fault/2 && f < m.fault
}

func (m *memStore) Get(_ context.Context, key string) (kvdb.KeyValue, bool, error) {
	before, _ := m.enter()
	defer m.mu.Unlock()
	if before {
		return kvdb.KeyValue{}, false, errUnknown
	}
	kv, ok := m.kvs[key]
	return kv, ok, nil
}

func (m *memStore) List(_ context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	before, _ := m.enter()
	defer m.mu.Unlock()
	if before {
		return nil, 0, errUnknown
	}
	var out []kvdb.KeyValue
	for k, kv := range m.kvs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, kv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, m.rev, nil
}

func (m *memStore) Put(ctx context.Context, key string, value []byte) error {
	_, err := m.Txn(ctx, nil, []kvdb.Op{kvdb.PutOp(key, value)})
	return err
}

func (m *memStore) Txn(_ context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	before, after := m.enter()
	defer m.mu.Unlock()
	if before {
		return false, errUnknown
	}
	for _, c := range cmps {
		kv, ok := m.kvs[c.Key]
		switch c.Kind {
		case kvdb.CmpAbsent:
			if ok {
				return false, nil
			}
		case kvdb.CmpValue:
			if !ok || string(kv.Value) != string(c.Value) {
				return false, nil
			}
		case kvdb.CmpModRevision:
			if kv.Revision != c.Revision {
				return false, nil
			}
		}
	}
	m.rev++
	for _, op := range ops {
		if op.Kind == kvdb.OpPut {
			m.kvs[op.Key] = kvdb.KeyValue{Key: op.Key, Value: append([]byte(nil), op.Value...), Revision: m.rev}
		} else {
			delete(m.kvs, op.Key)
		}
	}
	if after {
		return false, errUnknown
	}
	return true, nil
}

// records returns the node ID records: the name each ID's record names.
func (m *memStore) records(t *testing.T) map[uint32]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[uint32]string{}
	for k, kv := range m.kvs {
		rest, ok := strings.CutPrefix(k, codec.KSRPrefix)
		if !ok {
			continue
		}
		id, err := vppnode.ParseKey(rest)
		if err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
		rec := new(vppnode.VppNode)
		if err := codec.Unmarshal(kv.Value, rec); err != nil {
			t.Fatalf("record %q: %v", k, err)
		}
		out[id] = rec.GetName()
	}
	return out
}

// TestModelConcurrentClaimers: many claimers, some of them with records
// and index keys already in the store (restarts), claim at once through a
// store that interleaves requests at random and fails some before or
// after applying them; each claims again (a new resync, as the agent's
// ClaimRetry) until it has an ID. No ID is held twice, every node gets
// one, every node has exactly one record (a write of unknown outcome is
// found, never duplicated) and a restarted node keeps its ID.
func TestModelConcurrentClaimers(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := NewWithT(t)
			const n, restarted = 40, 10
			db := newMemStore(seed, 0.2)
			name := func(i int) string { return fmt.Sprintf("node-%02d", i) }
			kept := map[string]uint32{}
			for i := range restarted { // earlier claims, indexed and not (older agents)
				id := uint32(3*i + 2)
				db.kvs[codec.KSRPrefix+vppnode.Key(id)] = kvdb.KeyValue{Key: codec.KSRPrefix + vppnode.Key(id),
					Value: marshal(t, &vppnode.VppNode{Id: id, Name: name(i)})}
				if i%2 == 0 {
					db.kvs[nodesync.IndexPrefix+name(i)] = kvdb.KeyValue{Key: nodesync.IndexPrefix + name(i), Value: fmt.Appendf(nil, "%d", id)}
				}
				kept[name(i)] = id
			}
			ps := make([]*nodesync.Plugin, n)
			for i := range ps {
				ps[i] = newPlugin(t, name(i), db, &loop{}, withQuietLog())
			}
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, p := range ps {
				wg.Go(func() {
					<-start
					for round := 0; round < 200 && p.GetNodeID() == 0; round++ {
						_ = resync(p, nil) // transient and gave-up errors: claim again
					}
				})
			}
			close(start)
			wg.Wait()
			recs := db.records(t)
			held := map[uint32]string{}
			for i, p := range ps {
				id := p.GetNodeID()
				g.Expect(id).NotTo(BeZero(), "%s has an ID", name(i))
				g.Expect(held).NotTo(HaveKey(id), "ID %d held twice", id)
				held[id] = name(i)
				g.Expect(recs).To(HaveKeyWithValue(id, name(i)), "the record of %s's ID names it", name(i))
				if want, ok := kept[name(i)]; ok {
					g.Expect(id).To(Equal(want), "%s restarted and keeps its ID", name(i))
				}
			}
			g.Expect(recs).To(HaveLen(n), "one record per node")
		})
	}
}

// withQuietLog drops the plugin's logs (the model test's claims fail on
// purpose, hundreds of times).
func withQuietLog() nodesync.Option {
	return nodesync.UseDeps(func(d *nodesync.Deps) { d.Log = slog.New(slog.DiscardHandler) })
}
