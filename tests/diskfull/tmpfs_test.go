//go:build linux

package diskfull

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

// The ballast leaves the room asked for, a write past it fails with
// ENOSPC as on a full disk, and Drain gives the space back.
func TestTmpfsFillAndDrain(t *testing.T) {
	g := NewWithT(t)
	const size, room = 1 << 20, 64 << 10
	fs := MountTmpfs(t, size)
	free, err := fs.Free()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(BeNumerically("~", size, 4096))

	fs.Fill(t, room)
	free, err = fs.Free()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(Equal(int64(room)))

	f, err := os.Create(filepath.Join(fs.Dir, "more"))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	_, err = f.Write(make([]byte, room))
	g.Expect(err).NotTo(HaveOccurred(), "the room is there")
	_, err = f.Write(make([]byte, 4096))
	g.Expect(errors.Is(err, syscall.ENOSPC)).To(BeTrue(), "a write past the room: %v", err)

	fs.Drain(t)
	free, err = fs.Free()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(BeNumerically(">", size/2))
}
