package kvdb_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// recorder is a Broker that records the keys it is given and returns
// canned results keyed by what it was asked.
type recorder struct {
	keys   []string
	cmps   []kvdb.Cmp
	ops    []kvdb.Op
	events chan kvdb.WatchEvent
}

func (r *recorder) Put(_ context.Context, key string, _ []byte) error {
	r.keys = append(r.keys, key)
	return nil
}

func (r *recorder) Get(_ context.Context, key string) (kvdb.KeyValue, bool, error) {
	r.keys = append(r.keys, key)
	return kvdb.KeyValue{Key: key, Value: []byte("v")}, true, nil
}

func (r *recorder) List(_ context.Context, prefix string) ([]kvdb.KeyValue, int64, error) {
	r.keys = append(r.keys, prefix)
	return []kvdb.KeyValue{{Key: prefix + "1"}, {Key: prefix + "2"}}, 7, nil
}

func (r *recorder) Delete(_ context.Context, key string) (bool, error) {
	r.keys = append(r.keys, key)
	return true, nil
}

func (r *recorder) Txn(_ context.Context, cmps []kvdb.Cmp, ops []kvdb.Op) (bool, error) {
	r.cmps, r.ops = cmps, ops
	return true, nil
}

func (r *recorder) Watch(ctx context.Context, prefix string, _ int64) (<-chan kvdb.WatchEvent, error) {
	r.keys = append(r.keys, prefix)
	out := make(chan kvdb.WatchEvent)
	go func() {
		defer close(out)
		for {
			select {
			case ev := <-r.events:
				out <- ev
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func TestWithPrefixRewritesKeys(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	r := &recorder{}
	g.Expect(kvdb.WithPrefix(r, "")).To(BeIdenticalTo(r), "an empty prefix is no view")

	v := kvdb.WithPrefix(kvdb.WithPrefix(r, "a/"), "b/")
	g.Expect(v.Put(ctx, "k", nil)).To(Succeed())
	kv, found, err := v.Get(ctx, "k")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(kv.Key).To(Equal("k"))
	kvs, rev, err := v.List(ctx, "s/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev).To(BeEquivalentTo(7))
	g.Expect(kvs).To(HaveLen(2))
	g.Expect(kvs[0].Key).To(Equal("s/1"))
	_, err = v.Delete(ctx, "d")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.keys).To(Equal([]string{"a/b/k", "a/b/k", "a/b/s/", "a/b/d"}), "nested views concatenate")

	cmps := []kvdb.Cmp{kvdb.IfAbsent("c")}
	ops := []kvdb.Op{kvdb.PutOp("o", []byte("1"))}
	ok, err := v.Txn(ctx, cmps, ops)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(r.cmps[0].Key).To(Equal("a/b/c"))
	g.Expect(r.ops[0].Key).To(Equal("a/b/o"))
	g.Expect(cmps[0].Key).To(Equal("c"), "the caller's slices are not modified")
	g.Expect(ops[0].Key).To(Equal("o"))
}

func TestWithPrefixWatchStripsAndEnds(t *testing.T) {
	g := NewWithT(t)
	r := &recorder{events: make(chan kvdb.WatchEvent)}
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := kvdb.WithPrefix(r, "p/").Watch(ctx, "x", 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.keys).To(Equal([]string{"p/x"}))
	r.events <- kvdb.WatchEvent{Type: kvdb.EventPut, Key: "p/x1", Revision: 3}
	var ev kvdb.WatchEvent
	g.Eventually(ch).Should(Receive(&ev))
	g.Expect(ev.Key).To(Equal("x1"))
	g.Expect(ev.Revision).To(BeEquivalentTo(3))
	cancel()
	g.Eventually(ch).Should(BeClosed())
}

func TestCheckTxn(t *testing.T) {
	many := make([]kvdb.Op, kvdb.MaxTxnOps+1)
	for i := range many {
		many[i] = kvdb.PutOp(string(rune('a'+i%26))+string(rune('0'+i/26)), nil)
	}
	cases := []struct {
		name string
		cmps []kvdb.Cmp
		ops  []kvdb.Op
		want error
		msg  string
	}{
		{"empty is valid", nil, nil, nil, ""},
		{"too many ops", nil, many, kvdb.ErrInvalidTxn, "129 ops"},
		{"unknown op kind", nil, []kvdb.Op{{Kind: 9, Key: "k"}}, kvdb.ErrInvalidTxn, "unknown kind 9"},
		{"unknown cmp kind", []kvdb.Cmp{{Key: "k"}}, nil, kvdb.ErrInvalidTxn, `"k"`},
		{"empty op key", nil, []kvdb.Op{kvdb.DeleteOp("")}, kvdb.ErrInvalidKey, "op #0"},
		{"duplicate keys", nil, []kvdb.Op{kvdb.PutOp("k", nil), kvdb.PutOp("k", nil)}, kvdb.ErrInvalidTxn, `"k"`},
		{"huge value", nil, []kvdb.Op{kvdb.PutOp("k", make([]byte, kvdb.MaxValueLen+1))}, kvdb.ErrValueTooLarge, `"k"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := kvdb.CheckTxn(tc.cmps, tc.ops)
			if tc.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(err).To(MatchError(ContainSubstring(tc.msg)))
		})
	}
}
