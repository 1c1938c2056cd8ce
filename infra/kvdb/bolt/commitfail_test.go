package bolt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	"go.etcd.io/bbolt"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

func TestHasMeta(t *testing.T) {
	bad := errors.New("bad checksum")
	cases := []struct {
		name  string
		metas [2]meta
		errs  [2]error
		txid  uint64
		want  bool
	}{
		{"both older", [2]meta{{txid: 4}, {txid: 5}}, [2]error{}, 6, false},
		{"it is there", [2]meta{{txid: 6}, {txid: 5}}, [2]error{}, 6, true},
		{"a later one is there", [2]meta{{txid: 6}, {txid: 7}}, [2]error{}, 6, true},
		{"it is torn", [2]meta{{txid: 6}, {txid: 5}}, [2]error{bad, nil}, 6, false},
		{"both torn", [2]meta{{txid: 9}, {txid: 9}}, [2]error{bad, bad}, 6, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			NewWithT(t).Expect(hasMeta(c.metas, c.errs, c.txid)).To(Equal(c.want))
		})
	}
}

// forgeNewerMeta writes into the file, behind bbolt's back, what a commit
// that failed after writing its meta page leaves: the other meta slot
// holding the current meta with the next txid, which it returns.
func forgeNewerMeta(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	ps, metas, errs := readMetas(f, fi.Size())
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("meta pages: %v, %v", errs[0], errs[1])
	}
	cur := 0
	if metas[1].txid > metas[0].txid {
		cur = 1
	}
	buf := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.ReadAt(buf, int64(uint64(cur)*ps)); err != nil {
		t.Fatal(err)
	}
	other := 1 - cur
	order.PutUint64(buf[0:8], uint64(other))
	m := buf[pageHeaderSize:]
	order.PutUint64(m[48:56], metas[cur].txid+1)
	order.PutUint64(m[56:64], metaSum(buf))
	if _, err := f.WriteAt(buf, int64(uint64(other)*ps)); err != nil {
		t.Fatal(err)
	}
	return metas[cur].txid + 1
}

// A commit that bbolt reports as failed after its meta page reached the
// file: the batch's outcome is unknown and the store refuses every call
// (its reads would serve the rolled-back state); reopening the file
// resolves it.
func TestACommitThatReachedTheFileFailsTheStore(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	cfg := testConfig(t)
	p := newPlugin(t, cfg)
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.Put(ctx, "a", []byte("1"))).To(Succeed())

	s := p.store
	r := &writeReq{ops: []kvdb.Op{kvdb.PutOp("b", nil)}, done: make(chan writeResult, 1)}
	var served uint64
	g.Expect(s.db.View(func(tx *bbolt.Tx) error { served = uint64(tx.ID()); return nil })).To(Succeed())
	res := s.commitFailed([]*writeReq{r}, errors.New("injected: fsync failed"), served+1)
	g.Expect(res[0].err).NotTo(MatchError(kvdb.ErrUnknownOutcome), "nothing reached the file: not applied")
	g.Expect(p.Put(ctx, "c", nil)).To(Succeed(), "the store goes on")

	txid := forgeNewerMeta(t, cfg.DBPath)
	res = s.commitFailed([]*writeReq{r}, errors.New("injected: fsync failed"), txid)
	g.Expect(res[0].err).To(MatchError(kvdb.ErrUnknownOutcome))
	g.Expect(res[0].err).To(MatchError(kvdb.ErrStoreFailed))
	g.Expect(p.Put(ctx, "d", nil)).To(MatchError(kvdb.ErrStoreFailed))
	_, _, err := p.Get(ctx, "a")
	g.Expect(err).To(MatchError(kvdb.ErrStoreFailed), "reads could not tell either")
	_, _, err = p.List(ctx, "")
	g.Expect(err).To(MatchError(ContainSubstring("reopen it (restart the agent)")))
	g.Expect(p.Close()).To(Succeed())
}

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory, unmounted
// at cleanup. The tests that need a full disk run as root (CI does).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a small tmpfs to fill it up: run it as root (CI does)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount a tmpfs of %s on %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// A full disk fails the commit before its meta page is written: every
// write of the batch is "not applied", reads go on, and once space is
// freed the store takes writes again; a reopened file agrees.
func TestAFullDiskFailsWritesAsNotApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := mountTmpfs(t, "2m")
	cfg := testConfig(t)
	cfg.DBPath = filepath.Join(dir, "bolt.db")
	p := newPlugin(t, cfg)
	g.Expect(p.Init()).To(Succeed())
	g.Expect(p.Put(ctx, "before", []byte("kept"))).To(Succeed())
	ballast := filepath.Join(dir, "ballast")
	g.Expect(os.WriteFile(ballast, make([]byte, 1200<<10), 0o600)).To(Succeed())

	value := []byte(strings.Repeat("x", 4000))
	var failedKey string
	var werr error
	for i := range 1000 {
		key := "k" + strings.Repeat("0", 4) + string(rune('a'+i%26)) + "-" + string(rune('0'+i/26%10)) + string(rune('0'+i/260))
		if werr = p.Put(ctx, key, value); werr != nil {
			failedKey = key
			break
		}
	}
	g.Expect(werr).To(HaveOccurred(), "the tmpfs fills up")
	g.Expect(errors.Is(werr, syscall.ENOSPC)).To(BeTrue(), "%v", werr)
	g.Expect(werr).NotTo(MatchError(kvdb.ErrUnknownOutcome), "not applied")
	g.Expect(werr).NotTo(MatchError(kvdb.ErrStoreFailed))
	_, found, err := p.Get(ctx, failedKey)
	g.Expect(err).NotTo(HaveOccurred(), "reads go on")
	g.Expect(found).To(BeFalse())

	g.Expect(os.Remove(ballast)).To(Succeed())
	g.Expect(p.Put(ctx, "after", []byte("v"))).To(Succeed(), "space freed: writes work again")
	g.Expect(p.Close()).To(Succeed())

	q := openPlugin(t, cfg)
	_, found, err = q.Get(ctx, failedKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "the failed write is not in the reopened file")
	for _, k := range []string{"before", "after"} {
		_, found, err = q.Get(ctx, k)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).To(BeTrue(), k)
	}
}
