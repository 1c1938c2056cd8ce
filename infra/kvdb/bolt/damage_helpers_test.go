package bolt

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// testKey and testValue shape the keys of a test database like IPAM's
// pod records: a path-like key and a value of about 120 bytes.
func testKey(i int) string { return fmt.Sprintf("/ipam/pods/ns-%03d/pod-%07d", i%97, i) }

func testValue(i int) []byte {
	return fmt.Appendf(nil, `{"ip":"10.%d.%d.%d","rev":%d,"pad":"%0100d"}`, i>>16&255, i>>8&255, i&255, i, i)
}

// fillDB writes n keys through a plugin on cfg (transactions of
// kvdb.MaxTxnOps puts) and closes it.
func fillDB(t testing.TB, cfg Config, n int) {
	t.Helper()
	p := newPlugin(t, cfg)
	if err := p.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	for i := 0; i < n; i += kvdb.MaxTxnOps {
		var ops []kvdb.Op
		for j := i; j < min(n, i+kvdb.MaxTxnOps); j++ {
			ops = append(ops, kvdb.PutOp(testKey(j), testValue(j)))
		}
		if _, err := p.Txn(t.Context(), nil, ops); err != nil {
			t.Fatalf("Txn: %v", err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// bulkDB creates the database of cfg through the plugin, then adds n keys
// in random order straight through bbolt, in batches of 10,000 per
// transaction (much faster than the plugin for 100k keys; the same
// on-disk format).
func bulkDB(t testing.TB, cfg Config, n int) {
	t.Helper()
	fillDB(t, cfg, 0)
	db, err := bbolt.Open(cfg.DBPath, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
	for start := 0; start < n; start += 10000 {
		err := db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket(rootBucket)
			for _, i := range perm[start:min(n, start+10000)] {
				if err := b.Put([]byte(testKey(i)), encodeValue(int64(i+1), testValue(i))); err != nil {
					return err
				}
			}
			return tx.Bucket(metaBucket).Put(revisionKey, encodeRevision(int64(n)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// pageInfo is what bbolt says about one page.
type pageInfo struct {
	id       int
	typ      string // meta, freelist, branch, leaf, free
	overflow int
}

// pagesOf lists the pages of a sound database file, as bbolt sees them
// (continuation pages of an overflowed page are not listed).
func pagesOf(t testing.TB, path string) (pages []pageInfo, pageSize int) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	err = db.View(func(tx *bbolt.Tx) error {
		for id := 0; ; {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info == nil {
				return nil
			}
			pages = append(pages, pageInfo{id: info.ID, typ: info.Type, overflow: info.OverflowCount})
			id += 1 + info.OverflowCount
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages, db.Info().PageSize
}

// firstPage returns the first page of type typ.
func firstPage(t testing.TB, pages []pageInfo, typ string) pageInfo {
	t.Helper()
	for _, p := range pages {
		if p.typ == typ {
			return p
		}
	}
	t.Fatalf("no %s page in %v", typ, pages)
	return pageInfo{}
}

// writeAt overwrites the file at off with data.
func writeAt(t testing.TB, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// randomBytes returns n bytes from a fixed seed.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// churn writes a database at path with bbolt through many random
// transactions: puts of small and large values (overflow pages), deletes,
// nested buckets (inline while small), bucket deletions.
func churn(t testing.TB, path string, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for range 60 {
		err := db.Update(func(tx *bbolt.Tx) error {
			for range r.IntN(200) {
				if err := churnOp(tx, r, names); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// churnOp does one random change in tx.
func churnOp(tx *bbolt.Tx, r *rand.Rand, names [][]byte) error {
	top, err := tx.CreateBucketIfNotExists(names[r.IntN(len(names))])
	if err != nil {
		return err
	}
	b := top
	if r.IntN(3) == 0 {
		if b, err = top.CreateBucketIfNotExists([]byte("nested")); err != nil {
			return err
		}
	}
	key := fmt.Appendf(nil, "k%05d", r.IntN(3000))
	switch n := r.IntN(100); {
	case n < 60:
		size := r.IntN(200)
		if r.IntN(50) == 0 {
			size = 5000 + r.IntN(20000) // spans several pages
		}
		return b.Put(key, randomBytes(size, r.Uint64()))
	case n < 95:
		return b.Delete(key)
	case n < 97:
		if err := top.DeleteBucket([]byte("nested")); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		return nil
	}
	return nil
}
