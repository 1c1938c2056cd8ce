//go:build linux

package bolt

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

// TestGuardedTurnsAFaultIntoAnError reads a mapping past the end of its
// truncated file, the SIGBUS that killed the agent, inside guarded.
func TestGuardedTurnsAFaultIntoAnError(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "f")
	ps := os.Getpagesize()
	g.Expect(os.WriteFile(path, make([]byte, 2*ps), 0o600)).To(Succeed())
	f, err := os.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(f.Close()).To(Succeed()) }()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 2*ps, syscall.PROT_READ, syscall.MAP_SHARED)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(syscall.Munmap(mem)).To(Succeed()) }()
	g.Expect(os.Truncate(path, 0)).To(Succeed())

	var b byte
	err = guarded(func() error { b = mem[ps]; return nil })
	g.Expect(err).To(MatchError(errPanic))
	g.Expect(b).To(BeZero())
	g.Expect(guarded(func() error { panic("invalid freelist page: 2, page type is leaf") })).
		To(MatchError(ContainSubstring("bbolt panicked: invalid freelist page")))
	g.Expect(guarded(func() error { return nil })).To(Succeed())
}
