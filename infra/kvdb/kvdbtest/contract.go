package kvdbtest

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// contractCase is one subtest of the suite.
type contractCase struct {
	name string
	run  func(t *testing.T, a, b kvdb.Broker)
}

// RunContract runs the kvdb.Broker contract against brokers made by open.
// See the package doc for what open must return.
func RunContract(t *testing.T, open func(t *testing.T) (a, b kvdb.Broker)) {
	cases := []contractCase{
		{"PutGetOverwrite", testPutGetOverwrite},
		{"MissingKeyIsNotFound", testMissingKey},
		{"EmptyValue", testEmptyValue},
		{"ListByPrefixSorted", testList},
		{"Delete", testDelete},
		{"TxnOnValue", testTxnOnValue},
		{"TxnOnAbsence", testTxnOnAbsence},
		{"TxnOnModRevision", testTxnOnModRevision},
		{"TxnFailureAppliesNothing", testTxnFailureAppliesNothing},
		{"AtomicHelpers", testHelpers},
		{"PrefixedView", testPrefixedView},
		{"PrefixedViewWatch", testPrefixedWatch},
		{"WatchFromListRevision", testWatchFromListRev},
		{"WatchFromNow", testWatchFromNow},
		{"WatchEndsOnCancel", testWatchCancel},
		{"CompareAndSwapRace", testCASRace},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"WatchRace", testWatchRace},
		{"WatchesCreatedDuringWrites", testWatchesDuringWrites},
		{"InvalidArguments", testInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := open(t)
			c.run(t, a, b)
		})
	}
}

func testPutGetOverwrite(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "k", []byte("v1"))).To(Succeed())
	kv := mustGet(ctx, g, b, "k")
	g.Expect(kv.Key).To(Equal("k"))
	g.Expect(string(kv.Value)).To(Equal("v1"))
	g.Expect(kv.Revision).To(BeNumerically(">", 0))

	g.Expect(b.Put(ctx, "k", []byte("v2"))).To(Succeed())
	kv2 := mustGet(ctx, g, a, "k")
	g.Expect(string(kv2.Value)).To(Equal("v2"))
	g.Expect(kv2.Revision).To(BeNumerically(">", kv.Revision), "overwrite moves the mod revision")

	kv2.Value[0] = 'X' // returned slices belong to the caller
	g.Expect(string(mustGet(ctx, g, a, "k").Value)).To(Equal("v2"))

	buf := []byte("v3")
	g.Expect(a.Put(ctx, "k", buf)).To(Succeed())
	buf[0] = 'Z' // the store does not retain the argument
	g.Expect(string(mustGet(ctx, g, b, "k").Value)).To(Equal("v3"))
}

func testMissingKey(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	kv, found, err := a.Get(t.Context(), "nope")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse())
	g.Expect(kv).To(Equal(kvdb.KeyValue{}))
	kvs, _, err := b.List(t.Context(), "nope/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(BeEmpty())
}

func testEmptyValue(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "empty", nil)).To(Succeed())
	kv := mustGet(ctx, g, b, "empty")
	g.Expect(kv.Value).NotTo(BeNil(), "a present key has a non-nil value")
	g.Expect(kv.Value).To(BeEmpty())
}

func testList(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	keys := []string{"a/2", "a/1", "ab", "a", "b/1", "a/3", "a/1/x"}
	for _, k := range keys {
		g.Expect(a.Put(ctx, k, []byte("v:"+k))).To(Succeed())
	}
	kvs, rev, err := b.List(ctx, "a/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keysOf(kvs)).To(Equal([]string{"a/1", "a/1/x", "a/2", "a/3"}), "sorted, no neighbours")
	for _, kv := range kvs {
		g.Expect(string(kv.Value)).To(Equal("v:" + kv.Key))
		g.Expect(kv.Revision).To(And(BeNumerically(">", 0), BeNumerically("<=", rev)))
	}

	all, rev2, err := a.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	g.Expect(keysOf(all)).To(Equal(sorted))
	g.Expect(rev2).To(Equal(rev), "no write between the two lists")

	kvs[0].Value[0] = 'X'
	again, _, err := a.List(ctx, "a/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(again[0].Value)).To(Equal("v:a/1"))

	none, rev3, err := b.List(ctx, "zz")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty())
	g.Expect(rev3).To(Equal(rev))
}

func testDelete(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "d", []byte("x"))).To(Succeed())
	existed, err := b.Delete(ctx, "d")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(existed).To(BeTrue())
	existed, err = a.Delete(ctx, "d")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(existed).To(BeFalse())
	existed, err = a.Delete(ctx, "never")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(existed).To(BeFalse())
	expectMissing(ctx, g, b, "d")
}

func testInvalid(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	long := strings.Repeat("k", kvdb.MaxKeyLen+1)
	g.Expect(a.Put(ctx, "", []byte("x"))).To(MatchError(kvdb.ErrInvalidKey))
	g.Expect(a.Put(ctx, long, []byte("x"))).To(And(
		MatchError(kvdb.ErrInvalidKey), MatchError(ContainSubstring("4097"))))
	_, _, err := b.Get(ctx, "")
	g.Expect(err).To(MatchError(kvdb.ErrInvalidKey))
	_, err = b.Delete(ctx, "")
	g.Expect(err).To(MatchError(kvdb.ErrInvalidKey))
	_, err = a.Txn(ctx, nil, []kvdb.Op{kvdb.PutOp("", nil)})
	g.Expect(err).To(MatchError(kvdb.ErrInvalidKey))
	_, err = a.Txn(ctx, []kvdb.Cmp{kvdb.IfAbsent("")}, nil)
	g.Expect(err).To(MatchError(kvdb.ErrInvalidKey))
	err = a.Put(ctx, "big", make([]byte, kvdb.MaxValueLen+1))
	g.Expect(err).To(And(MatchError(kvdb.ErrValueTooLarge), MatchError(ContainSubstring(`"big"`))))
	_, err = a.Txn(ctx, nil, []kvdb.Op{kvdb.PutOp("dup", nil), kvdb.DeleteOp("dup")})
	g.Expect(err).To(And(MatchError(kvdb.ErrInvalidTxn), MatchError(ContainSubstring(`"dup"`))))
	_, err = a.Txn(ctx, []kvdb.Cmp{{Key: "k"}}, nil)
	g.Expect(err).To(MatchError(kvdb.ErrInvalidTxn))

	kvs, _, err := b.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(BeEmpty(), "nothing invalid was written")

	maxKey := strings.Repeat("m", kvdb.MaxKeyLen)
	g.Expect(a.Put(ctx, maxKey, []byte("ok"))).To(Succeed(), "a key of exactly MaxKeyLen is valid")
	g.Expect(mustGet(ctx, g, b, maxKey).Value).To(Equal([]byte("ok")))
	largest := bytes.Repeat([]byte{'v'}, kvdb.MaxValueLen)
	g.Expect(a.Put(ctx, maxKey, largest)).To(Succeed(), "a value of exactly MaxValueLen under the longest key")
	g.Expect(mustGet(ctx, g, b, maxKey).Value).To(HaveLen(kvdb.MaxValueLen))
	_, err = a.Txn(ctx, nil, []kvdb.Op{kvdb.PutOp(maxKey, largest)})
	g.Expect(err).NotTo(HaveOccurred(), "and in a one-op Txn")
}

// mustGet reads a key that must exist.
func mustGet(ctx context.Context, g Gomega, b kvdb.Broker, key string) kvdb.KeyValue {
	kv, found, err := b.Get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue(), "key %q should exist", key)
	return kv
}

// expectMissing asserts that key does not exist.
func expectMissing(ctx context.Context, g Gomega, b kvdb.Broker, key string) {
	_, found, err := b.Get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "key %q should not exist", key)
}

func keysOf(kvs []kvdb.KeyValue) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Key
	}
	return out
}
