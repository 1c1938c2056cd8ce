package bolt

import (
	"fmt"
	"os"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// commitFailed settles a batch whose commit (transaction txid) failed
// inside bbolt: an I/O error writing the pages or the meta page, or
// syncing them (a full disk, a failing device). bbolt has rolled the
// transaction back in memory, but its meta page may have reached the file
// all the same (bbolt writes it last, after the pages it points to), and
// then the page cache, which bbolt reads its meta pages from, and any
// restart see the batch applied, while bbolt's free-page list says it is
// not. The file's meta pages tell which:
//
//   - no valid meta page holds txid: nothing of the batch can ever be read
//     back, so every request of it is definitely not applied, and the
//     store goes on (a full disk that is cleared lets the next write
//     succeed);
//   - one does (or the file cannot be read): the outcome is unknown, and
//     this process cannot go on safely (its next commit could reuse pages
//     the newer meta page points to). Every request of the batch is
//     answered with kvdb.ErrUnknownOutcome and the store fails every later
//     call with kvdb.ErrStoreFailed: reopening the file (a restart)
//     resolves it, from what the file holds.
func (s *store) commitFailed(batch []*writeReq, err error, txid uint64) []writeResult {
	results := make([]writeResult, len(batch))
	reached, cerr := s.commitReachedFile(txid)
	if cerr == nil && !reached {
		s.log.Error("commit failed before it reached the file: its writes are not applied", "path", s.path,
			"requests", len(batch), "err", err)
		for i := range results {
			results[i] = writeResult{err: fmt.Errorf("bolt: commit to %q failed, not applied: %w", s.path, err)}
		}
		return results
	}
	why := "its meta page reached the file"
	if cerr != nil {
		why = fmt.Sprintf("the file's meta pages cannot be read (%v)", cerr)
	}
	s.fail(fmt.Errorf("a commit to %q failed (%v) and %s: the file may hold writes this process cannot read; reopen it (restart the agent)",
		s.path, err, why))
	s.log.Error("commit failed after it may have reached the file: the store refuses every call until reopened",
		"path", s.path, "requests", len(batch), "err", err, "why", why)
	for i := range results {
		results[i] = writeResult{err: fmt.Errorf("bolt: %w: %w", kvdb.ErrUnknownOutcome, s.usable())}
	}
	s.stats.unknown.Add(uint64(len(batch)))
	return results
}

// commitReachedFile tells whether the file holds a valid meta page of
// transaction txid (or a later one): the failed commit of txid wrote it.
func (s *store) commitReachedFile(txid uint64) (bool, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	_, metas, errs := readMetas(f, fi.Size())
	return hasMeta(metas, errs, txid), nil
}

// hasMeta tells whether a valid meta page has txid or a later one.
func hasMeta(metas [2]meta, errs [2]error, txid uint64) bool {
	for i, m := range metas {
		if errs[i] == nil && m.txid >= txid {
			return true
		}
	}
	return false
}

// fail puts the store out of service with reason (the first reason stays).
func (s *store) fail(reason error) {
	s.failed.CompareAndSwap(nil, &reason)
}

// usable returns nil, or why the store refuses every call: closed, or
// failed (wrapping kvdb.ErrStoreFailed).
func (s *store) usable() error {
	if s.closed.Load() {
		return kvdb.ErrClosed
	}
	if reason := s.failed.Load(); reason != nil {
		return fmt.Errorf("%w: %w", kvdb.ErrStoreFailed, *reason)
	}
	return nil
}
