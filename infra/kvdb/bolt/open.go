package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/contiv-ipam/agent/infra/config"
)

// ErrDamaged marks a database file that is not a sound bbolt database:
// empty, truncated, with no valid meta page, with a bad freelist, branch
// or leaf page, or one that made bbolt panic while opening it. Start-up
// refuses such a file; -bolt-recover moves it aside.
var ErrDamaged = errors.New("damaged database file")

// errPanic marks a panic (or memory fault) of bbolt caught by guarded.
var errPanic = errors.New("bbolt panicked")

// damageError is the start-up error for a damaged file: it names the
// file, says what is wrong and how to recover, and wraps ErrDamaged and
// the reason.
type damageError struct {
	path   string
	reason error
}

func damaged(path string, reason error) error { return &damageError{path: path, reason: reason} }

func (e *damageError) Error() string {
	return fmt.Sprintf("bolt: %v %q: %v. The agent does not start on it. To recover, start the agent once with -%s "+
		"(env %s=true): the file is moved aside to %s%s<UTC time> (kept, never deleted) and a fresh database "+
		"is created, from which the agent rebuilds the pod allocations out of the Kubernetes state",
		ErrDamaged, e.path, e.reason, RecoverFlag, config.EnvName(RecoverFlag), e.path, damagedSuffix)
}

func (e *damageError) Unwrap() []error { return []error{ErrDamaged, e.reason} }

// openDB opens the database at cfg.DBPath and prepares it; a file that
// does not exist is created. An existing file is first opened and locked
// by us (the flock bbolt takes, so no other agent writes it meanwhile),
// checked with plain reads (checkMeta, checkPages), and only then handed
// to bbolt, which locks the same open file again at once. bbolt.Open and
// prepare run under guarded: a panic or a fault on the mapped file is an
// error wrapping ErrDamaged, not a crash.
func openDB(cfg Config, log *slog.Logger) (*bbolt.DB, int64, error) {
	f, err := os.OpenFile(cfg.DBPath, os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return openBolt(cfg, nil)
	case err != nil:
		return nil, 0, fmt.Errorf("bolt: open %q: %w", cfg.DBPath, err)
	}
	if err := lockFile(f, cfg.LockTimeout); err != nil {
		return nil, 0, errors.Join(openError(cfg, err), f.Close())
	}
	if err := checkFile(f, cfg.DBPath, log); err != nil {
		return nil, 0, errors.Join(err, f.Close())
	}
	return openBolt(cfg, f)
}

// checkFile runs checkMeta and checkPages on the open file f; an error
// wraps ErrDamaged and names path.
func checkFile(f *os.File, path string, log *slog.Logger) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("bolt: stat %q: %w", path, err)
	}
	rep, err := checkMeta(f, st.Size())
	if err != nil {
		return damaged(path, err)
	}
	if rep.warning != "" {
		log.Warn("one meta page of the database is unusable; opening it on the other one", "path", path,
			"detail", rep.warning)
	}
	if err := checkPages(f, rep); err != nil {
		return damaged(path, err)
	}
	return nil
}

// openBolt hands the file to bbolt (f nil: bbolt opens or creates
// cfg.DBPath itself) and prepares the buckets, under guarded. On error
// the file is closed.
func openBolt(cfg Config, f *os.File) (*bbolt.DB, int64, error) {
	opts := &bbolt.Options{Timeout: cfg.LockTimeout}
	if f != nil {
		opts.OpenFile = func(string, int, os.FileMode) (*os.File, error) { return f, nil }
	}
	var db *bbolt.DB
	err := guarded(func() (err error) {
		db, err = bbolt.Open(cfg.DBPath, cfg.FileMode.Perm(), opts)
		return err
	})
	if err != nil {
		if f != nil && errors.Is(err, errPanic) {
			_ = f.Close() // bbolt closes it when it returns an error, not when it panics
		}
		return nil, 0, openError(cfg, err)
	}
	var rev int64
	err = guarded(func() (err error) {
		rev, err = prepare(db)
		return err
	})
	if errors.Is(err, errPanic) {
		return nil, 0, errors.Join(damaged(cfg.DBPath, err), guarded(db.Close))
	}
	if err != nil {
		return nil, 0, errors.Join(fmt.Errorf("bolt: %q: %w", cfg.DBPath, err), guarded(db.Close))
	}
	return db, rev, nil
}

// openError explains why bbolt.Open (or our lock) failed.
func openError(cfg Config, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("bolt: open %q: the file is locked by another process (gave up after lock-timeout %s): %w",
			cfg.DBPath, cfg.LockTimeout, err)
	case errors.Is(err, errPanic), errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, berrors.ErrChecksum):
		return damaged(cfg.DBPath, err)
	}
	return fmt.Errorf("bolt: open %q: %w", cfg.DBPath, err)
}

// guarded runs fn, turning a panic into an error wrapping errPanic. A
// memory fault (SIGBUS or SIGSEGV on the mapped file) panics instead of
// killing the process while fn runs (debug.SetPanicOnFault, which holds
// for this goroutine only: fn must not hand bbolt's work to another).
func guarded(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	return fn()
}
