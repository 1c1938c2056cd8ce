//go:build linux

package diskfull

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Tmpfs is a tmpfs of a fixed size mounted for one test, and the ballast
// file that fills it. Owner: the test goroutine that mounted it.
type Tmpfs struct {
	Dir  string // the mount point
	Size int64  // bytes
	// ballast is the path of the ballast file, "" when there is none.
	ballast string
}

// RequireRoot fails the test, saying why, unless it runs as root (the
// tmpfs mount needs CAP_SYS_ADMIN).
func RequireRoot(t testing.TB) {
	t.Helper()
	if euid := os.Geteuid(); euid != 0 {
		t.Fatalf("tests/diskfull mounts a tmpfs and must run as root (euid %d): run `go test ./tests/diskfull/` as root", euid)
	}
}

// MountTmpfs mounts a tmpfs of size bytes on a new directory in
// t.TempDir() and unmounts it at cleanup, after every cleanup registered
// later (an agent started on it is stopped first).
func MountTmpfs(t testing.TB, size int64) *Tmpfs {
	t.Helper()
	RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount -t tmpfs -o size=%d tmpfs %s: %v (this test needs root with CAP_SYS_ADMIN)", size, dir, err)
	}
	t.Cleanup(func() { unmount(t, dir) })
	return &Tmpfs{Dir: dir, Size: size}
}

// unmount unmounts dir, retrying while it is busy (a process that just
// ended), then detaching it.
func unmount(t testing.TB, dir string) {
	t.Helper()
	var err error
	for range 50 {
		if err = syscall.Unmount(dir, 0); !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if errors.Is(err, syscall.EBUSY) {
		err = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	if err != nil {
		t.Errorf("umount %s: %v", dir, err)
	}
}

// Free is the number of bytes the file system has free.
func (fs *Tmpfs) Free() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(fs.Dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", fs.Dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// Fill writes a ballast file that leaves about room bytes free (rounded
// to pages) and returns its size.
func (fs *Tmpfs) Fill(t testing.TB, room int64) int64 {
	t.Helper()
	if fs.ballast != "" {
		t.Fatalf("%s: filled already", fs.Dir)
	}
	free, err := fs.Free()
	if err != nil {
		t.Fatal(err)
	}
	size := free - room
	if size <= 0 {
		t.Fatalf("%s: %d bytes free, not more than the room to leave (%d)", fs.Dir, free, room)
	}
	fs.ballast = filepath.Join(fs.Dir, "ballast")
	f, err := os.OpenFile(fs.ballast, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = 0xba // not zeros: written pages, never a hole
	}
	for left := size; left > 0; {
		n := min(left, int64(len(chunk)))
		if _, err := f.Write(chunk[:n]); err != nil {
			_ = f.Close()
			t.Fatalf("writing the ballast %s (%d of %d bytes left): %v", fs.ballast, left, size, err)
		}
		left -= n
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return size
}

// Drain removes the ballast file.
func (fs *Tmpfs) Drain(t testing.TB) {
	t.Helper()
	if fs.ballast == "" {
		t.Fatalf("%s: no ballast to remove", fs.Dir)
	}
	if err := os.Remove(fs.ballast); err != nil {
		t.Fatal(err)
	}
	fs.ballast = ""
}
