package kvdbtest

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

func testTxnOnValue(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "t1", []byte("1"))).To(Succeed())
	g.Expect(a.Put(ctx, "t2", []byte("2"))).To(Succeed())

	ok, err := b.Txn(ctx,
		[]kvdb.Cmp{kvdb.IfValue("t1", []byte("1")), kvdb.IfValue("t2", []byte("2"))},
		[]kvdb.Op{kvdb.PutOp("t1", []byte("10")), kvdb.DeleteOp("t2"), kvdb.PutOp("t3", []byte("3"))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	t1, t3 := mustGet(ctx, g, a, "t1"), mustGet(ctx, g, a, "t3")
	g.Expect(string(t1.Value)).To(Equal("10"))
	g.Expect(string(t3.Value)).To(Equal("3"))
	g.Expect(t1.Revision).To(Equal(t3.Revision), "the ops of one txn share a revision")
	expectMissing(ctx, g, a, "t2")

	ok, err = b.Txn(ctx, []kvdb.Cmp{kvdb.IfValue("t1", []byte("1"))}, []kvdb.Op{kvdb.PutOp("t1", []byte("x"))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "stale value")
	g.Expect(string(mustGet(ctx, g, a, "t1").Value)).To(Equal("10"))

	for _, v := range [][]byte{nil, {}, []byte("x")} {
		ok, err = a.Txn(ctx, []kvdb.Cmp{kvdb.IfValue("t2", v)}, []kvdb.Op{kvdb.PutOp("t2", []byte("y"))})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse(), "a value compare on a missing key fails (value %q)", v)
	}
	expectMissing(ctx, g, b, "t2")

	ok, err = a.Txn(ctx, nil, []kvdb.Op{kvdb.PutOp("t4", []byte("4"))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "no cmps: unconditional")
	g.Expect(string(mustGet(ctx, g, b, "t4").Value)).To(Equal("4"))
}

func testTxnOnAbsence(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	ok, err := a.Txn(ctx, []kvdb.Cmp{kvdb.IfAbsent("n")}, []kvdb.Op{kvdb.PutOp("n", []byte("first"))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	ok, err = b.Txn(ctx, []kvdb.Cmp{kvdb.IfAbsent("n")}, []kvdb.Op{kvdb.PutOp("n", []byte("second"))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())
	g.Expect(string(mustGet(ctx, g, a, "n").Value)).To(Equal("first"))

	g.Expect(a.Put(ctx, "e", nil)).To(Succeed())
	ok, err = b.Txn(ctx, []kvdb.Cmp{kvdb.IfAbsent("e")}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "a key with an empty value exists")
}

func testTxnOnModRevision(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "m", []byte("1"))).To(Succeed())
	kv := mustGet(ctx, g, b, "m")

	ok, err := b.Txn(ctx, []kvdb.Cmp{kvdb.IfModRevision("m", kv.Revision)}, []kvdb.Op{kvdb.PutOp("m", []byte("2"))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	ok, err = a.Txn(ctx, []kvdb.Cmp{kvdb.IfModRevision("m", kv.Revision)}, []kvdb.Op{kvdb.PutOp("m", []byte("3"))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "the revision moved on")
	g.Expect(string(mustGet(ctx, g, a, "m").Value)).To(Equal("2"))

	ok, err = a.Txn(ctx, []kvdb.Cmp{kvdb.IfModRevision("missing", 0)}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "a missing key has mod revision 0")
}

func testTxnFailureAppliesNothing(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(a.Put(ctx, "f/1", []byte("1"))).To(Succeed())
	before, rev, err := b.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())

	ok, err := b.Txn(ctx,
		[]kvdb.Cmp{kvdb.IfValue("f/1", []byte("1")), kvdb.IfAbsent("f/1")},
		[]kvdb.Op{kvdb.PutOp("f/2", []byte("2")), kvdb.DeleteOp("f/1")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "one of two cmps fails")

	ok, err = a.Txn(ctx, []kvdb.Cmp{kvdb.IfValue("f/1", []byte("1"))}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "no ops: only evaluates")

	after, rev2, err := a.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(before))
	g.Expect(rev2).To(Equal(rev), "neither a failed nor a read-only txn writes a revision")
}

func testHelpers(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	expectTxn := func(ok bool, err error) Assertion {
		g.Expect(err).NotTo(HaveOccurred())
		return g.Expect(ok)
	}
	expectTxn(kvdb.PutIfAbsent(ctx, a, "h", []byte("1"))).To(BeTrue())
	expectTxn(kvdb.PutIfAbsent(ctx, b, "h", []byte("2"))).To(BeFalse())
	g.Expect(string(mustGet(ctx, g, a, "h").Value)).To(Equal("1"))

	expectTxn(kvdb.CompareAndSwap(ctx, b, "h", []byte("2"), []byte("3"))).To(BeFalse())
	expectTxn(kvdb.CompareAndSwap(ctx, b, "h", []byte("1"), []byte("3"))).To(BeTrue())
	g.Expect(string(mustGet(ctx, g, a, "h").Value)).To(Equal("3"))
	expectTxn(kvdb.CompareAndSwap(ctx, a, "missing", nil, []byte("x"))).To(BeFalse())
	expectMissing(ctx, g, b, "missing")

	expectTxn(kvdb.CompareAndDelete(ctx, a, "h", []byte("1"))).To(BeFalse())
	g.Expect(string(mustGet(ctx, g, b, "h").Value)).To(Equal("3"))
	expectTxn(kvdb.CompareAndDelete(ctx, a, "h", []byte("3"))).To(BeTrue())
	expectMissing(ctx, g, b, "h")
}

func testPrefixedView(t *testing.T, a, b kvdb.Broker) {
	g := NewWithT(t)
	ctx := t.Context()
	va, vb := kvdb.WithPrefix(a, "view/"), kvdb.WithPrefix(b, "view/")
	g.Expect(a.Put(ctx, "viewer", []byte("neighbour"))).To(Succeed())
	g.Expect(a.Put(ctx, "other/k1", []byte("outside"))).To(Succeed())

	g.Expect(va.Put(ctx, "k1", []byte("1"))).To(Succeed())
	g.Expect(mustGet(ctx, g, b, "view/k1").Key).To(Equal("view/k1"), "put prepends")
	kv := mustGet(ctx, g, vb, "k1")
	g.Expect(kv.Key).To(Equal("k1"), "get strips")
	g.Expect(string(kv.Value)).To(Equal("1"))

	g.Expect(b.Put(ctx, "view/sub/k2", []byte("2"))).To(Succeed())
	kvs, _, err := vb.List(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keysOf(kvs)).To(Equal([]string{"k1", "sub/k2"}), "list strips and stays inside")
	kvs, _, err = va.List(ctx, "sub/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keysOf(kvs)).To(Equal([]string{"sub/k2"}))
	g.Expect(mustGet(ctx, g, kvdb.WithPrefix(va, "sub/"), "k2").Key).To(Equal("k2"), "views nest")

	ok, err := va.Txn(ctx, []kvdb.Cmp{kvdb.IfValue("k1", []byte("1")), kvdb.IfAbsent("k3")},
		[]kvdb.Op{kvdb.PutOp("k3", []byte("3")), kvdb.DeleteOp("k1")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "txn cmps see prefixed keys")
	g.Expect(string(mustGet(ctx, g, a, "view/k3").Value)).To(Equal("3"), "txn ops are prefixed")
	expectMissing(ctx, g, a, "view/k1")
	g.Expect(string(mustGet(ctx, g, a, "other/k1").Value)).To(Equal("outside"))
	ok, err = vb.Txn(ctx, []kvdb.Cmp{kvdb.IfAbsent("k3")}, []kvdb.Op{kvdb.PutOp("k3", nil)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse())

	existed, err := vb.Delete(ctx, "k3")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(existed).To(BeTrue())
	expectMissing(ctx, g, a, "view/k3")
	g.Expect(va.Put(ctx, "", []byte("x"))).To(MatchError(kvdb.ErrInvalidKey), "the relative key must not be empty")
}
