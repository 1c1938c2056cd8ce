package bolt

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// fileReport is what checkMeta learnt about an existing database file.
type fileReport struct {
	size     int64
	pageSize uint64
	used     int  // the meta page bbolt will use: 0 or 1
	meta     meta // its content
	// warning, when set, says why the other meta page is unusable; bbolt
	// opens the file on the used one (a torn meta write at a crash leaves
	// one bad meta page in an otherwise sound file).
	warning string
}

// checkMeta checks the meta pages of an existing database file of size
// bytes, read through r, before bbolt maps it:
//   - an empty file is damage (a new database is a file that does not
//     exist);
//   - at least one meta page must be valid (magic, version, checksum, a
//     sane page size); with both valid they must agree on the page size;
//   - the meta page bbolt will use (the valid one with the higher txid)
//     must have its high-water mark inside the file (a shorter file is
//     what made bbolt die of SIGBUS) and its root and freelist pages
//     below that mark.
//
// One unusable meta page is allowed when the used one passes: the report
// carries a warning. It never panics, whatever the bytes.
func checkMeta(r io.ReaderAt, size int64) (fileReport, error) {
	if size == 0 {
		return fileReport{}, errors.New("the file is empty (0 bytes); a new database is created only where no file exists")
	}
	ps, metas, errs := readMetas(r, size)
	for i, err := range errs {
		if errors.Is(err, errPageSize) {
			return fileReport{}, fmt.Errorf("meta page %d: %w", i, err)
		}
	}
	if errs[0] != nil && errs[1] != nil {
		return fileReport{}, fmt.Errorf("no valid meta page (page 0: %v; page 1: %v): not a bolt database, or a damaged one",
			errs[0], errs[1])
	}
	used := 0
	if errs[0] != nil || (errs[1] == nil && metas[1].txid > metas[0].txid) {
		used = 1
	}
	rep := fileReport{size: size, pageSize: ps, used: used, meta: metas[used]}
	if err := checkMetaRefs(rep.meta, ps, size); err != nil {
		return fileReport{}, fmt.Errorf("meta page %d (txid %d), the one bbolt would use: %w", used, rep.meta.txid, err)
	}
	other := 1 - used
	if err := errs[other]; err != nil {
		rep.warning = fmt.Sprintf("meta page %d is unusable (%v); bbolt uses meta page %d (txid %d)", other, err, used, rep.meta.txid)
	} else if err := checkMetaRefs(metas[other], ps, size); err != nil {
		rep.warning = fmt.Sprintf("meta page %d (txid %d, older, not used): %v", other, metas[other].txid, err)
	}
	return rep, nil
}

// readMetas reads both meta pages. The page size comes from meta page 0;
// when that page is bad, meta page 1 is searched at every accepted page
// size (as bbolt does) and must declare the size it was found at. An
// error wrapping errPageSize is a meta page bbolt would trust with a page
// size that is bad or that the other page contradicts.
func readMetas(r io.ReaderAt, size int64) (ps uint64, metas [2]meta, errs [2]error) {
	metas[0], errs[0] = readMeta(r, size, 0)
	if errs[0] == nil {
		ps = uint64(metas[0].pageSize)
		metas[1], errs[1] = readMeta(r, size, ps)
		if errs[1] == nil && metas[1].pageSize != metas[0].pageSize {
			errs[1] = fmt.Errorf("%w: %d differs from meta page 0's %d", errPageSize, metas[1].pageSize, ps)
		}
		return ps, metas, errs
	}
	for off := uint64(minPageSize); off <= maxPageSize; off <<= 1 {
		m, err := readMeta(r, size, off)
		switch {
		case err == nil && uint64(m.pageSize) == off:
			metas[1] = m
			return off, metas, errs
		case err == nil || errors.Is(err, errPageSize):
			errs[1] = fmt.Errorf("%w: the meta page at offset %d declares page size %d", errPageSize, off, m.pageSize)
			return 0, metas, errs
		}
	}
	if _, errs[1] = readMeta(r, size, uint64(os.Getpagesize())); errs[1] == nil {
		errs[1] = errors.New("not found at any page size it declares")
	}
	return 0, metas, errs
}

// readMeta reads and validates the meta page at offset off.
func readMeta(r io.ReaderAt, size int64, off uint64) (meta, error) {
	buf := make([]byte, pageHeaderSize+metaSize)
	if off+uint64(len(buf)) > uint64(size) {
		return meta{}, fmt.Errorf("the file (%d bytes) ends before offset %d", size, off+uint64(len(buf)))
	}
	if _, err := r.ReadAt(buf, int64(off)); err != nil {
		return meta{}, fmt.Errorf("read at offset %d: %w", off, err)
	}
	return validMeta(buf)
}

// checkMetaRefs checks that the file covers m's high-water mark and that
// the root and freelist pages are below it (and above the meta pages).
func checkMetaRefs(m meta, ps uint64, size int64) error {
	if m.pgid > uint64(size)/ps {
		return fmt.Errorf("the file is %d bytes, shorter than its high-water mark (%d pages of %d bytes): truncated",
			size, m.pgid, ps)
	}
	if m.root < 2 || m.root >= m.pgid {
		return fmt.Errorf("root bucket page %d is outside [2, %d)", m.root, m.pgid)
	}
	if m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid) {
		return fmt.Errorf("freelist page %d is outside [2, %d)", m.freelist, m.pgid)
	}
	return nil
}
