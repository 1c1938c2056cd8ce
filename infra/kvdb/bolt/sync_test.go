package bolt

import (
	"testing"

	. "github.com/onsi/gomega"
)

// Acknowledged means durable: every commit must reach the disk before the
// writer is answered, so the database is opened with fsync on and with
// the freelist synced (a crash must not need a freelist rebuild that
// could reuse pages of committed data).
func TestTheStoreOpensWithFsyncOn(t *testing.T) {
	g := NewWithT(t)
	p := openPlugin(t, testConfig(t))
	db := p.store.db
	g.Expect(db.NoSync).To(BeFalse(), "NoSync skips the fsync of every commit")
	g.Expect(db.NoGrowSync).To(BeFalse(), "NoGrowSync skips the fsync after the file grows")
	g.Expect(db.NoFreelistSync).To(BeFalse())
	g.Expect(db.IsReadOnly()).To(BeFalse())
}
