package checkpoint_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
)

// A JSONFile keeps what Encode writes, mode 0600, and leaves nothing
// else in its directory; Restore gives back what Decode reads.
func TestJSONFileKeepsTheEncodedDocument(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "ipam.json")
	f := checkpoint.NewJSONFile(path)
	var d checkpoint.Data
	g.Expect(f.Restore(&d)).To(MatchError(checkpoint.ErrNoCheckpoint))
	g.Expect(f.Restore(&d)).To(MatchError(fs.ErrNotExist))

	g.Expect(f.Checkpoint(rich())).To(Succeed())
	want, err := checkpoint.Encode(rich())
	g.Expect(err).NotTo(HaveOccurred())
	got, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal(string(want)))
	st, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	g.Expect(f.Restore(&d)).To(Succeed())
	g.Expect(d).To(Equal(rich()))

	// A second checkpoint replaces the first; no temporary file is left.
	smaller := rich()
	smaller.Allocations = smaller.Allocations[:1]
	g.Expect(f.Checkpoint(smaller)).To(Succeed())
	g.Expect(f.Restore(&d)).To(Succeed())
	g.Expect(d.Allocations).To(HaveLen(1))
	es, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es).To(HaveLen(1))
}

// What Decode refuses is neither written nor restored, and a refused
// Checkpoint leaves the file as it was; *into is left alone on errors.
func TestJSONFileRefusals(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ipam.json")
	f := checkpoint.NewJSONFile(path)
	g.Expect(f.Checkpoint(rich())).To(Succeed())
	before, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())

	bad := rich()
	bad.Allocations[0].IPs = []string{"10.1.1.300"}
	g.Expect(f.Checkpoint(bad)).To(MatchError(checkpoint.ErrInvalid))
	after, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(before))

	g.Expect(os.WriteFile(path, []byte(`{"version": "vpc-cni-ipam/1", "allocations": []}`), 0o600)).To(Succeed())
	d := checkpoint.Data{Node: "untouched"}
	err = f.Restore(&d)
	g.Expect(err).To(MatchError(checkpoint.ErrInvalid))
	g.Expect(err).To(MatchError(ContainSubstring(`restoring ` + path + `: invalid checkpoint: field "version": "vpc-cni-ipam/1"`)))
	g.Expect(d.Node).To(Equal("untouched"))

	g.Expect(checkpoint.NewJSONFile(filepath.Join(t.TempDir(), "missing", "ipam.json")).Checkpoint(rich())).
		To(MatchError(fs.ErrNotExist), "the directory must exist")
}

// Concurrent checkpoints each write a whole document.
func TestJSONFileConcurrentCheckpoints(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ipam.json")
	f := checkpoint.NewJSONFile(path)
	var wg sync.WaitGroup
	for n := range 8 {
		wg.Go(func() {
			d := rich()
			d.Allocations = d.Allocations[:1+n%4]
			if err := f.Checkpoint(d); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var d checkpoint.Data
	g.Expect(f.Restore(&d)).To(Succeed())
	g.Expect(len(d.Allocations)).To(BeNumerically(">=", 1))
}

// Memory keeps the encoded document.
func TestMemoryCheckpointer(t *testing.T) {
	g := NewWithT(t)
	var m checkpoint.Memory
	var d checkpoint.Data
	g.Expect(m.Restore(&d)).To(MatchError(checkpoint.ErrNoCheckpoint))
	g.Expect(m.Document()).To(BeEmpty())
	g.Expect(m.Checkpoint(rich())).To(Succeed())
	want, err := checkpoint.Encode(rich())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Document()).To(Equal(want))
	g.Expect(m.Restore(&d)).To(Succeed())
	g.Expect(d).To(Equal(rich()))
	bad := rich()
	bad.Allocations = append(bad.Allocations, bad.Allocations[0])
	g.Expect(m.Checkpoint(bad)).To(MatchError(checkpoint.ErrInvalid))
	g.Expect(m.Document()).To(Equal(want))
}
