package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// ErrNoCheckpoint: Restore found no checkpoint (the file does not exist,
// nothing was kept yet).
var ErrNoCheckpoint = errors.New("no checkpoint")

// Checkpointer keeps one checkpoint and gives it back: Checkpoint
// replaces the kept one with d, whole or not at all; Restore reads the
// last one kept into *into (ErrNoCheckpoint when there is none). The
// document goes through Encode and Decode, so that what Restore returns
// is what Decode returns for it: a Checkpointer keeps nothing Decode
// would refuse, and a kept document of another format or a newer version
// is refused as Decode refuses it.
//
// The AWS VPC CNI's datastore keeps its allocations behind an interface
// of the same two calls (its checkpoint file is another format: see
// DecodeAWS).
type Checkpointer interface {
	Checkpoint(d Data) error
	Restore(into *Data) error
}

// JSONFile keeps the checkpoint in a file, as Encode writes it. Each
// Checkpoint writes a temporary file in the same directory, syncs it,
// gives it the file's mode and renames it over the file, then syncs the
// directory: the file holds the old document or the new one, never part
// of one, whatever happens. Calls are serialised; two JSONFiles of one
// path (or two processes) must not write at once.
type JSONFile struct {
	path string
	perm os.FileMode
	mu   sync.Mutex
}

var (
	_ Checkpointer = (*JSONFile)(nil)
	_ Checkpointer = (*Memory)(nil)
)

// NewJSONFile returns the Checkpointer of the file at path, written with
// mode 0600 (a checkpoint names every pod of a node). The directory must
// exist.
func NewJSONFile(path string) *JSONFile { return &JSONFile{path: path, perm: 0o600} }

// Path is the file's path.
func (f *JSONFile) Path() string { return f.path }

// Checkpoint encodes d and replaces the file with it atomically.
func (f *JSONFile) Checkpoint(d Data) error {
	doc, err := Encode(d)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", f.path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := writeAtomic(f.path, doc, f.perm); err != nil {
		return fmt.Errorf("checkpoint %s: %w", f.path, err)
	}
	return nil
}

// Restore reads and decodes the file; a missing file is ErrNoCheckpoint.
// *into is left alone on any error.
func (f *JSONFile) Restore(into *Data) error {
	f.mu.Lock()
	doc, err := os.ReadFile(f.path)
	f.mu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restoring %s: %w: %w", f.path, ErrNoCheckpoint, err)
	}
	if err != nil {
		return fmt.Errorf("restoring %s: %w", f.path, err)
	}
	d, err := Decode(doc)
	if err != nil {
		return fmt.Errorf("restoring %s: %w", f.path, err)
	}
	*into = d
	return nil
}

// Memory keeps the checkpoint in memory, encoded (tests, and a node that
// wants no file). The zero Memory holds none. It is safe for concurrent
// use.
type Memory struct {
	mu  sync.Mutex
	doc []byte
}

// Checkpoint encodes d and keeps it.
func (m *Memory) Checkpoint(d Data) error {
	doc, err := Encode(d)
	if err != nil {
		return fmt.Errorf("checkpoint in memory: %w", err)
	}
	m.mu.Lock()
	m.doc = doc
	m.mu.Unlock()
	return nil
}

// Restore decodes the document kept; none kept is ErrNoCheckpoint.
func (m *Memory) Restore(into *Data) error {
	m.mu.Lock()
	doc := m.doc
	m.mu.Unlock()
	if doc == nil {
		return fmt.Errorf("restoring from memory: %w", ErrNoCheckpoint)
	}
	d, err := Decode(doc)
	if err != nil {
		return fmt.Errorf("restoring from memory: %w", err)
	}
	*into = d
	return nil
}

// Document is the document kept, as Encode wrote it (nil: none).
func (m *Memory) Document() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.doc...)
}

// writeAtomic writes data to path through a temporary file in the same
// directory: written, given perm, synced, renamed over path, and the
// directory synced so that the rename survives a crash. The temporary
// file is removed on failure.
func writeAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if base == "" {
		return fmt.Errorf("%q is not a file name", path)
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable; a file system that cannot sync a
// directory (EINVAL) is let be.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
