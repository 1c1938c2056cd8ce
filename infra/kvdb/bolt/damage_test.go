package bolt

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/bbolt"

	"github.com/contiv-ipam/agent/infra/logging/logtest"
)

// damagedDBKeys is enough keys for the data bucket to have branch pages.
const damagedDBKeys = 2000

// damage changes the database file at path; pages are its pages before.
type damage func(t *testing.T, path string, pages []pageInfo, ps int)

func truncateTo(size func(ps, hwm int) int64) damage {
	return func(t *testing.T, path string, pages []pageInfo, ps int) {
		hwm := pages[len(pages)-1].id + pages[len(pages)-1].overflow + 1
		if err := os.Truncate(path, size(ps, hwm)); err != nil {
			t.Fatal(err)
		}
	}
}

func fillWith(fill func(n int) []byte) damage {
	return func(t *testing.T, path string, _ []pageInfo, _ int) {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		writeAt(t, path, 0, fill(int(st.Size())))
	}
}

// onPage overwrites bytes of the first page of type typ, at offset off
// inside it.
func onPage(typ string, off int, data func(ps int) []byte) damage {
	return func(t *testing.T, path string, pages []pageInfo, ps int) {
		p := firstPage(t, pages, typ)
		writeAt(t, path, int64(p.id*ps+off), data(ps))
	}
}

func u64(v uint64) func(int) []byte {
	return func(int) []byte { return binary.NativeEndian.AppendUint64(nil, v) }
}
func u16(v uint16) func(int) []byte {
	return func(int) []byte { return binary.NativeEndian.AppendUint16(nil, v) }
}

// breakMeta flips the bits of a byte of the high-water mark of meta page i.
func breakMeta(i int) damage {
	return func(t *testing.T, path string, _ []pageInfo, ps int) {
		off := int64(i*ps + pageHeaderSize + 40)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		writeAt(t, path, off, []byte{^data[off]})
	}
}

func both(a, b damage) damage {
	return func(t *testing.T, path string, pages []pageInfo, ps int) {
		a(t, path, pages, ps)
		b(t, path, pages, ps)
	}
}

// freeALeaf makes the freelist list one page: a leaf in use.
func freeALeaf(t *testing.T, path string, pages []pageInfo, ps int) {
	fl, leaf := firstPage(t, pages, "freelist"), firstPage(t, pages, "leaf")
	writeAt(t, path, int64(fl.id*ps+10), binary.NativeEndian.AppendUint16(nil, 1))
	writeAt(t, path, int64(fl.id*ps+pageHeaderSize), binary.NativeEndian.AppendUint64(nil, uint64(leaf.id)))
}

// pageBytes reads page p of the file.
func pageBytes(t *testing.T, path string, p pageInfo, ps int) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data[p.id*ps : (p.id+1)*ps]
}

// unsortLeaf makes the key of element 1 of the first leaf sort first.
func unsortLeaf(t *testing.T, path string, pages []pageInfo, ps int) {
	leaf := firstPage(t, pages, "leaf")
	page := pageBytes(t, path, leaf, ps)
	const elem1 = pageHeaderSize + elemSize
	keyAt := elem1 + int(binary.NativeEndian.Uint32(page[elem1+4:]))
	writeAt(t, path, int64(leaf.id*ps+keyAt), []byte{0})
}

// shareChild points element 1 of the first branch at element 0's child.
func shareChild(t *testing.T, path string, pages []pageInfo, ps int) {
	branch := firstPage(t, pages, "branch")
	child0 := pageBytes(t, path, branch, ps)[pageHeaderSize+8 : pageHeaderSize+16]
	writeAt(t, path, int64(branch.id*ps+pageHeaderSize+elemSize+8), child0)
}

var damages = []struct {
	name   string
	damage damage
	reason string // in the error, besides the path and the recovery
}{
	{"truncated to 10 kB", truncateTo(func(int, int) int64 { return 10 << 10 }), "truncated"},
	{"truncated inside meta page 0", truncateTo(func(int, int) int64 { return 60 }), "no valid meta page"},
	{"truncated after meta page 0", truncateTo(func(int, int) int64 { return 100 }), "truncated"},
	{"truncated inside meta page 1", truncateTo(func(ps, _ int) int64 { return int64(ps + ps/2) }), "truncated"},
	{"truncated one byte into the last page", truncateTo(func(ps, hwm int) int64 { return int64((hwm-1)*ps + 1) }), "truncated"},
	{"truncated one byte short", truncateTo(func(ps, hwm int) int64 { return int64(hwm*ps - 1) }), "truncated"},
	{"zero-length", truncateTo(func(int, int) int64 { return 0 }), "empty (0 bytes)"},
	{"all zeros", fillWith(func(n int) []byte { return make([]byte, n) }), "no valid meta page"},
	{"random bytes", fillWith(func(n int) []byte { return randomBytes(n, 7) }), "no valid meta page"},
	{"both meta pages broken", both(breakMeta(0), breakMeta(1)), "checksum"},
	{"freelist page typed as a leaf", onPage("freelist", 8, u16(flagLeaf)), "freelist page"},
	{"freelist lists a leaf in use", freeALeaf, "is in use and in the freelist"},
	{"garbage freelist page", onPage("freelist", 0, func(ps int) []byte { return randomBytes(ps, 11) }), "freelist"},
	{"branch child beyond the high-water mark", onPage("branch", pageHeaderSize+8, u64(1<<40)), "outside [2,"},
	{"branch child pointing at a meta page", onPage("branch", pageHeaderSize+8, u64(1)), "outside [2,"},
	{"branch element count too big", onPage("branch", 10, u16(0xFFF0)), "elements need"},
	{"garbage branch page body", onPage("branch", pageHeaderSize, func(ps int) []byte {
		return randomBytes(ps-pageHeaderSize, 13)
	}), ""},
	{"garbage leaf page", onPage("leaf", 0, func(ps int) []byte { return randomBytes(ps, 17) }), ""},
	{"leaf keys out of order", unsortLeaf, "does not sort after"},
	{"two branch elements share a child", shareChild, "is reached twice"},
	{"leaf key past the page end", onPage("leaf", pageHeaderSize+8, func(int) []byte {
		return binary.NativeEndian.AppendUint32(nil, 1<<20)
	}), "runs past the page end"},
}

// TestDamagedFileFailsInitNamingTheFileAndTheRecovery damages a real
// database in every way we know and opens it in this process (a SIGBUS
// or a panic would kill the test): Init fails with an error wrapping
// ErrDamaged that names the file, the reason and the recovery, and the
// file is left as it was.
func TestDamagedFileFailsInitNamingTheFileAndTheRecovery(t *testing.T) {
	for _, tc := range damages {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := testConfig(t)
			fillDB(t, cfg, damagedDBKeys)
			pages, ps := pagesOf(t, cfg.DBPath)
			tc.damage(t, cfg.DBPath, pages, ps)
			before, err := os.ReadFile(cfg.DBPath)
			g.Expect(err).NotTo(HaveOccurred())

			p := newPlugin(t, cfg)
			err = p.Init()
			g.Expect(err).To(MatchError(ErrDamaged))
			g.Expect(err).To(MatchError(ContainSubstring(`"` + cfg.DBPath + `"`)))
			g.Expect(err).To(MatchError(ContainSubstring(tc.reason)))
			g.Expect(err).To(MatchError(ContainSubstring("-bolt-recover (env BOLT_RECOVER=true)")))
			g.Expect(p.Close()).To(Succeed())

			after, err := os.ReadFile(cfg.DBPath)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bytes.Equal(after, before)).To(BeTrue(), "a refused file is left as it was")
		})
	}
}

// logBuffer collects a plugin's log lines.
type logBuffer = logtest.Buffer

// recoveryClock is the fixed time the recovery tests move files at.
var recoveryClock = time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))

// newRecoveringPlugin builds a plugin on cfg whose command line is args,
// with env as its environment, logging into log.
func newRecoveringPlugin(t *testing.T, cfg Config, log *logBuffer, env map[string]string, args ...string) *Plugin {
	t.Helper()
	p := newPlugin(t, cfg)
	p.Log = slog.New(slog.NewTextHandler(log, nil))
	p.now = func() time.Time { return recoveryClock }
	p.env = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	p.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRecoverMovesTheDamagedFileAsideAndStartsFresh: with -bolt-recover
// (or BOLT_RECOVER) a damaged file is renamed with the UTC time, byte for
// byte, the move is logged, and the plugin works on a fresh database. A
// second recovery in the same second takes the next free name.
func TestRecoverMovesTheDamagedFileAsideAndStartsFresh(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"flag", nil, []string{"-bolt-recover"}},
		{"env", map[string]string{"BOLT_RECOVER": "true"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := testConfig(t)
			fillDB(t, cfg, 300)
			g.Expect(os.Truncate(cfg.DBPath, 10<<10)).To(Succeed())
			damaged, err := os.ReadFile(cfg.DBPath)
			g.Expect(err).NotTo(HaveOccurred())
			want := cfg.DBPath + ".damaged-20250102T020405Z"

			var log logBuffer
			p := newRecoveringPlugin(t, cfg, &log, tc.env, tc.args...)
			g.Expect(p.Init()).To(Succeed())
			g.Expect(os.ReadFile(want)).To(Equal(damaged), "moved aside byte for byte")
			g.Expect(log.String()).To(ContainSubstring("damaged database moved aside by -bolt-recover"))
			g.Expect(log.String()).To(ContainSubstring("moved-to=" + want))
			g.Expect(log.String()).To(ContainSubstring("truncated"), "the log says what was wrong")
			kvs, _, err := p.List(t.Context(), "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kvs).To(BeEmpty(), "a fresh database")
			g.Expect(p.Put(t.Context(), "k", []byte("v"))).To(Succeed())
			g.Expect(p.Close()).To(Succeed())

			g.Expect(os.Truncate(cfg.DBPath, 0)).To(Succeed())
			again := newRecoveringPlugin(t, cfg, &log, tc.env, tc.args...)
			g.Expect(again.Init()).To(Succeed())
			g.Expect(again.Close()).To(Succeed())
			g.Expect(os.ReadFile(want)).To(Equal(damaged), "the first moved file is never overwritten")
			g.Expect(os.ReadFile(want+"-2")).To(BeEmpty(), "the second takes the next name")
		})
	}
}

// TestRecoverLeavesASoundFileAlone: -bolt-recover on a sound file moves
// nothing, keeps the data, and says the flag can go.
func TestRecoverLeavesASoundFileAlone(t *testing.T) {
	g := NewWithT(t)
	cfg := testConfig(t)
	fillDB(t, cfg, 10)
	var log logBuffer
	p := newRecoveringPlugin(t, cfg, &log, nil, "-bolt-recover")
	g.Expect(p.Init()).To(Succeed())
	defer func() { g.Expect(p.Close()).To(Succeed()) }()
	kvs, _, err := p.List(t.Context(), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kvs).To(HaveLen(10))
	g.Expect(log.String()).To(ContainSubstring("nothing was moved; remove the flag"))
	moved, err := filepath.Glob(cfg.DBPath + ".damaged-*")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).To(BeEmpty())
}

// TestRecoverMovesOnlyDamage: a file held by another process, or written
// in a data format this agent does not read, is an error even with
// -bolt-recover, and stays where it is.
func TestRecoverMovesOnlyDamage(t *testing.T) {
	t.Run("locked", func(t *testing.T) {
		g := NewWithT(t)
		cfg := testConfig(t)
		openPlugin(t, cfg)
		var log logBuffer
		err := newRecoveringPlugin(t, cfg, &log, nil, "-bolt-recover").Init()
		g.Expect(err).To(MatchError(ContainSubstring("locked by another process")))
		g.Expect(err).NotTo(MatchError(ErrDamaged))
		g.Expect(cfg.DBPath).To(BeARegularFile())
	})
	t.Run("other data format", func(t *testing.T) {
		g := NewWithT(t)
		cfg := testConfig(t)
		fillDB(t, cfg, 1)
		db, err := bbolt.Open(cfg.DBPath, 0o600, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(metaBucket).Put(formatKey, []byte("2")) })).To(Succeed())
		g.Expect(db.Close()).To(Succeed())
		var log logBuffer
		err = newRecoveringPlugin(t, cfg, &log, nil, "-bolt-recover").Init()
		g.Expect(err).To(MatchError(ContainSubstring(`unsupported data format "2"`)))
		g.Expect(err).NotTo(MatchError(ErrDamaged))
		g.Expect(cfg.DBPath).To(BeARegularFile())
	})
}

func TestRecoverFlagValueIsChecked(t *testing.T) {
	g := NewWithT(t)
	var log logBuffer
	p := newRecoveringPlugin(t, testConfig(t), &log, map[string]string{"BOLT_RECOVER": "perhaps"})
	g.Expect(p.Init()).To(MatchError(ContainSubstring(`flag -bolt-recover / env BOLT_RECOVER: "perhaps" is not a boolean`)))
}

// TestOneBadMetaPageOpensWithAWarning: bbolt falls back on the other meta
// page when one is torn (a crash while writing it); so do we, saying so.
func TestOneBadMetaPageOpensWithAWarning(t *testing.T) {
	cases := []struct {
		name     string
		newest   bool // break the meta page of the newest transaction
		wantKeys int
	}{
		{"older meta page broken: nothing lost", false, 3},
		{"newest meta page broken: the last transaction is lost", true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := testConfig(t)
			p := openPlugin(t, cfg)
			for _, k := range []string{"a", "b", "c"} {
				g.Expect(p.Put(t.Context(), k, []byte(k))).To(Succeed())
			}
			g.Expect(p.Close()).To(Succeed())
			newest := newestMeta(t, cfg.DBPath)
			broken := 1 - newest
			if tc.newest {
				broken = newest
			}
			_, ps := pagesOf(t, cfg.DBPath)
			breakMeta(broken)(t, cfg.DBPath, nil, ps)

			var log logBuffer
			q := newRecoveringPlugin(t, cfg, &log, nil)
			g.Expect(q.Init()).To(Succeed())
			defer func() { g.Expect(q.Close()).To(Succeed()) }()
			g.Expect(log.String()).To(ContainSubstring("one meta page of the database is unusable"))
			kvs, _, err := q.List(t.Context(), "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(kvs).To(HaveLen(tc.wantKeys))
		})
	}
}

// newestMeta returns the meta page (0 or 1) with the higher txid.
func newestMeta(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0 := parseMeta(data)
	m1 := parseMeta(data[m0.pageSize:])
	if m1.txid > m0.txid {
		return 1
	}
	return 0
}

// TestSoundDatabasesPassTheCheck: files bbolt wrote through many
// transactions (puts, deletes, large values with overflow pages, nested
// and inline buckets) pass checkMeta and checkPages, as they pass
// bbolt's own tx.Check.
func TestSoundDatabasesPassTheCheck(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "db")
			churn(t, path, seed)
			db, err := bbolt.Open(path, 0o600, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(db.View(func(tx *bbolt.Tx) error {
				for err := range tx.Check() {
					return err
				}
				return nil
			})).To(Succeed(), "bbolt's own check")
			g.Expect(db.Close()).To(Succeed())

			f, err := os.Open(path)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { g.Expect(f.Close()).To(Succeed()) }()
			st, err := f.Stat()
			g.Expect(err).NotTo(HaveOccurred())
			rep, err := checkMeta(f, st.Size())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rep.warning).To(BeEmpty())
			g.Expect(checkPages(f, rep)).To(Succeed())
		})
	}
}

// TestCheckMetaRefusesPageSizesBboltWouldTrust: a meta page whose magic,
// version and checksum hold is trusted by bbolt, page size included, so
// a bad or contradicted page size refuses the file even when the other
// meta page is sound.
func TestCheckMetaRefusesPageSizesBboltWouldTrust(t *testing.T) {
	cases := []struct {
		name     string
		page     int // the meta page to change
		pageSize int // 0: twice the real one
		want     string
	}{
		{"not a power of two", 0, 3000, "meta page 0: bad page size: 3000 is not a power of two"},
		{"too small", 1, 512, "meta page 1: bad page size: 512 is not a power of two in [1024, 16777216]"},
		{"the two disagree", 1, 0, "meta page 1: bad page size: %d differs from meta page 0's %d"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := testConfig(t)
			fillDB(t, cfg, 10)
			data, err := os.ReadFile(cfg.DBPath)
			g.Expect(err).NotTo(HaveOccurred())
			ps := int(parseMeta(data).pageSize)
			want := tc.want
			if tc.pageSize == 0 {
				tc.pageSize, want = 2*ps, fmt.Sprintf(tc.want, 2*ps, ps)
			}
			meta := data[tc.page*ps:]
			binary.NativeEndian.PutUint32(meta[pageHeaderSize+8:], uint32(tc.pageSize))
			binary.NativeEndian.PutUint64(meta[pageHeaderSize+metaSumLen:], metaSum(meta))

			_, err = checkMeta(bytes.NewReader(data), int64(len(data)))
			g.Expect(err).To(MatchError(errPageSize))
			g.Expect(err).To(MatchError(ContainSubstring(want)))
		})
	}
}
