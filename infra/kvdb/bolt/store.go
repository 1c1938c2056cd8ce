package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// On-disk format, version 1:
//   - bucket "root": key -> 8-byte big-endian mod revision + value bytes;
//   - bucket "meta": "revision" -> 8-byte big-endian store revision (the
//     revision of the last committed write), "format" -> "1".
var (
	rootBucket    = []byte("root")
	metaBucket    = []byte("meta")
	revisionKey   = []byte("revision")
	formatKey     = []byte("format")
	formatVersion = []byte("1")
)

// revLen is the size of the revision header in front of every value.
const revLen = 8

// store is one open database: reads run directly on bbolt, writes go
// through the committer goroutine (committer.go), changes fan out through
// the hub (watch.go).
type store struct {
	db       *bbolt.DB
	path     string
	log      *slog.Logger
	maxBatch int
	hub      *hub

	queue     chan *writeReq
	closing   chan struct{} // closed by Close: no new writes
	stopped   chan struct{} // closed when the committer has exited
	closed    atomic.Bool
	closeOnce sync.Once

	rev      int64 // last committed revision; owned by the committer
	stats    statsCounters
	progress *progress // the batches finished, for reads after an unknown outcome
	// failed, once set, is why the store refuses every call (commitFailed).
	failed atomic.Pointer[error]

	// beforeCommit, when set (tests only), is called by the committer with
	// the number of requests about to be committed together.
	beforeCommit func(batch int)
}

// openStore opens (or creates) the database file cfg.DBPath and starts
// its committer. An existing file is checked before bbolt maps it (see
// openDB); a damaged one fails with an error wrapping ErrDamaged unless
// rec.enabled, which moves it aside and starts on a fresh file.
func openStore(cfg Config, log *slog.Logger, rec recovery) (*store, error) {
	if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o755); err != nil {
		return nil, fmt.Errorf("bolt: create the directory of db-path %q: %w", cfg.DBPath, err)
	}
	db, rev, err := openDB(cfg, log)
	switch {
	case err != nil && rec.enabled && errors.Is(err, ErrDamaged):
		if db, rev, err = recoverDB(cfg, log, rec, err); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case rec.enabled:
		log.Warn("-"+RecoverFlag+" is set but the database is sound: nothing was moved; remove the flag",
			"path", cfg.DBPath)
	}
	s := &store{
		db:       db,
		path:     cfg.DBPath,
		log:      log,
		maxBatch: cfg.MaxBatchSize,
		hub:      newHub(rev, cfg.WatchHistory, cfg.WatchBuffer, log),
		queue:    make(chan *writeReq, 4*cfg.MaxBatchSize),
		closing:  make(chan struct{}),
		stopped:  make(chan struct{}),
		rev:      rev,
		progress: newProgress(),
	}
	go s.commitLoop()
	return s, nil
}

// prepare creates the buckets of a new database, checks the format of an
// existing one and returns its revision.
func prepare(db *bbolt.DB) (rev int64, err error) {
	err = db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(rootBucket); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		switch f := meta.Get(formatKey); {
		case f == nil:
			if err := meta.Put(formatKey, formatVersion); err != nil {
				return err
			}
		case !bytes.Equal(f, formatVersion):
			return fmt.Errorf("unsupported data format %q (this agent reads %q)", f, formatVersion)
		}
		rev = readRevision(meta)
		return nil
	})
	return rev, err
}

func readRevision(meta *bbolt.Bucket) int64 {
	if b := meta.Get(revisionKey); len(b) == revLen {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func encodeRevision(rev int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(rev)) }

// encodeValue prepends the mod revision to value.
func encodeValue(rev int64, value []byte) []byte {
	out := make([]byte, revLen, revLen+len(value))
	binary.BigEndian.PutUint64(out, uint64(rev))
	return append(out, value...)
}

// decodeValue splits a stored value into its mod revision and a copy of
// its bytes (non-nil). ok is false when raw is nil or too short.
func decodeValue(raw []byte) (rev int64, value []byte, ok bool) {
	if len(raw) < revLen {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(raw)), append([]byte{}, raw[revLen:]...), true
}

// view runs fn in a read transaction, mapping a closed database to
// ErrClosed. It is ordered after every write whose caller was answered
// with kvdb.ErrUnknownOutcome: it waits for the commit that held it (see
// settle), so that it sees that write's outcome.
func (s *store) view(ctx context.Context, op, key string, fn func(tx *bbolt.Tx) error) error {
	if err := s.usable(); err != nil {
		return fmt.Errorf("bolt %s %q: %w", op, key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bolt %s %q: %w", op, key, err)
	}
	if err := s.settle(ctx); err != nil {
		return fmt.Errorf("bolt %s %q: %w", op, key, err)
	}
	err := s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("bolt %s %q: %w", op, key, kvdb.ErrClosed)
	}
	if err != nil {
		return fmt.Errorf("bolt %s %q: %w", op, key, err)
	}
	return nil
}

// settle waits until the commits holding the writes answered as unknown
// so far have finished. A store put out of service by such a commit fails
// instead (its reads could not tell).
func (s *store) settle(ctx context.Context) error {
	if err := s.progress.wait(ctx, s.stopped); err != nil {
		return err
	}
	return s.usable()
}

// get implements Broker.Get.
func (s *store) get(ctx context.Context, key string) (kv kvdb.KeyValue, found bool, err error) {
	if err := kvdb.CheckKey(key); err != nil {
		return kvdb.KeyValue{}, false, err
	}
	err = s.view(ctx, "get", key, func(tx *bbolt.Tx) error {
		raw := tx.Bucket(rootBucket).Get([]byte(key))
		if raw == nil {
			return nil
		}
		rev, value, ok := decodeValue(raw)
		if !ok {
			return fmt.Errorf("stored value of %d bytes lacks its revision header", len(raw))
		}
		kv, found = kvdb.KeyValue{Key: key, Value: value, Revision: rev}, true
		return nil
	})
	if err != nil {
		return kvdb.KeyValue{}, false, err
	}
	return kv, found, nil
}

// list implements Broker.List: one read transaction gives both the keys
// and the revision.
func (s *store) list(ctx context.Context, prefix string) (kvs []kvdb.KeyValue, rev int64, err error) {
	err = s.view(ctx, "list", prefix, func(tx *bbolt.Tx) error {
		rev = readRevision(tx.Bucket(metaBucket))
		p := []byte(prefix)
		c := tx.Bucket(rootBucket).Cursor()
		for k, raw := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, raw = c.Next() {
			modRev, value, ok := decodeValue(raw)
			if !ok {
				return fmt.Errorf("key %q: stored value of %d bytes lacks its revision header", k, len(raw))
			}
			kvs = append(kvs, kvdb.KeyValue{Key: string(k), Value: value, Revision: modRev})
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return kvs, rev, nil
}

// close stops the committer (failing queued writes with ErrClosed), closes
// every watch and then the file. It is idempotent.
func (s *store) close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.closing)
		<-s.stopped
		s.hub.close()
		if cerr := s.db.Close(); cerr != nil {
			err = fmt.Errorf("bolt: close %q: %w", s.path, cerr)
		}
	})
	return err
}
