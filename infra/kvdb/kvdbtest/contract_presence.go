package kvdbtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/infra/kvdb"
)

// PresenceClients are what RunPresenceContract's open returns: two
// independent clients of one store that holds no keys, a broker to read
// the keys with (any client of the same store), and Crash, which ends
// client A the way a killed process ends: its keep-alives stop and
// nothing is revoked.
type PresenceClients struct {
	A, B  kvdb.PresenceStore
	Read  kvdb.Broker
	Crash func()
}

// presenceWait bounds the waits for a lease to end.
const presenceWait = 15 * time.Second

// RunPresenceContract runs the kvdb.PresenceStore contract against clients
// made by open (see PresenceClients).
func RunPresenceContract(t *testing.T, open func(t *testing.T) PresenceClients) {
	cases := []struct {
		name string
		run  func(t *testing.T, c PresenceClients)
	}{
		{"ClaimAndRelease", testPresenceClaimRelease},
		{"HeldByAnotherHolder", testPresenceHeld},
		{"KeyWithoutLeaseNeverExpires", testPresenceNoLease},
		{"SameValueTakesOver", testPresenceTakeOver},
		{"TakeOverAtTheHoldersRevision", testPresenceTakeOverAtRevision},
		{"TakeOverNeverOverwritesANewerWrite", testPresenceTakeOverStale},
		{"CrashedHolderExpires", testPresenceCrash},
		{"InvalidArguments", testPresenceInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

func testPresenceClaimRelease(t *testing.T, c PresenceClients) {
	g := NewWithT(t)
	ctx := t.Context()
	pres, err := c.A.ClaimPresence(ctx, "presence/a", []byte("holder-a"), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pres.Key()).To(Equal("presence/a"))
	g.Expect(string(mustGet(ctx, g, c.Read, "presence/a").Value)).To(Equal("holder-a"))
	g.Expect(pres.Lost()).NotTo(BeClosed())

	g.Expect(pres.Release(ctx)).To(Succeed())
	expectMissing(ctx, g, c.Read, "presence/a")
	g.Eventually(pres.Lost()).Should(BeClosed())
	g.Expect(pres.Release(ctx)).To(Succeed(), "a second Release does nothing")
}

func testPresenceHeld(t *testing.T, c PresenceClients) {
	g := NewWithT(t)
	ctx := t.Context()
	pres, err := c.A.ClaimPresence(ctx, "presence/h", []byte("holder-a"), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = pres.Release(ctx) }()

	_, err = c.B.ClaimPresence(ctx, "presence/h", []byte("holder-b"), 5*time.Second)
	g.Expect(err).To(MatchError(kvdb.ErrPresenceHeld))
	var held *kvdb.PresenceHeldError
	g.Expect(errors.As(err, &held)).To(BeTrue())
	g.Expect(held.Key).To(Equal("presence/h"))
	g.Expect(string(held.Holder)).To(Equal("holder-a"))
	g.Expect(held.TTL).To(And(BeNumerically(">", 0), BeNumerically("<=", 5*time.Second)))
	g.Expect(err.Error()).To(ContainSubstring(`key "presence/h" holds "holder-a"`))
	g.Expect(string(mustGet(ctx, g, c.Read, "presence/h").Value)).To(Equal("holder-a"), "nothing written")
	g.Expect(pres.Lost()).NotTo(BeClosed())
}

func testPresenceNoLease(t *testing.T, c PresenceClients) {
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(c.Read.Put(ctx, "presence/n", []byte("forever"))).To(Succeed())
	_, err := c.A.ClaimPresence(ctx, "presence/n", []byte("holder-a"), time.Second)
	var held *kvdb.PresenceHeldError
	g.Expect(errors.As(err, &held)).To(BeTrue(), "error %v", err)
	g.Expect(held.TTL).To(BeNumerically("<", 0))
	g.Expect(err.Error()).To(ContainSubstring("never expires"))
}

func testPresenceTakeOver(t *testing.T, c PresenceClients) {
	g := NewWithT(t)
	ctx := t.Context()
	old, err := c.A.ClaimPresence(ctx, "presence/t", []byte("same"), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	cur, err := c.B.ClaimPresence(ctx, "presence/t", []byte("same"), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred(), "the same value is the same holder")

	g.Expect(old.Release(ctx)).To(Succeed())
	g.Expect(string(mustGet(ctx, g, c.Read, "presence/t").Value)).To(Equal("same"),
		"revoking the old lease leaves the key: it moved to the new lease")
	g.Expect(cur.Release(ctx)).To(Succeed())
	expectMissing(ctx, g, c.Read, "presence/t")
}

// A holder declared dead by the caller (here alive: the store cannot
// tell) is replaced at the revision its PresenceHeldError gave; its lease
// no longer holds the key.
func testPresenceTakeOverAtRevision(t *testing.T, c PresenceClients) {
	g := NewWithT(t)
	ctx := t.Context()
	old, err := c.A.ClaimPresence(ctx, "presence/o", []byte("holder-a"), 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.B.ClaimPresence(ctx, "presence/o", []byte("holder-b"), 5*time.Second)
	var held *kvdb.PresenceHeldError
	g.Expect(errors.As(err, &held)).To(BeTrue(), "error %v", err)
	g.Expect(held.Revision).To(Equal(mustGet(ctx, g, c.Read, "presence/o").Revision), "the key's mod revision")

	cur, err := c.B.TakeOverPresence(ctx, "presence/o", []byte("holder-b"), 5*time.Second, held.Revision)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cur.Key()).To(Equal("presence/o"))
	kv := mustGet(ctx, g, c.Read, "presence/o")
	g.Expect(string(kv.Value)).To(Equal("holder-b"))
	g.Expect(kv.Revision).To(BeNumerically(">", held.Revision))

	g.Expect(old.Release(ctx)).To(Succeed())
	g.Expect(string(mustGet(ctx, g, c.Read, "presence/o").Value)).To(Equal("holder-b"),
		"revoking the old holder's lease leaves the key: it is bound to the new lease")
	g.Expect(cur.Lost()).NotTo(BeClosed())
	g.Expect(cur.Release(ctx)).To(Succeed())
	expectMissing(ctx, g, c.Read, "presence/o")

	// The revision of a key that is gone since takes over nothing: the
	// key is created as by ClaimPresence.
	again, err := c.B.TakeOverPresence(ctx, "presence/o", []byte("holder-b"), 5*time.Second, held.Revision)
	g.Expect(err).NotTo(HaveOccurred(), "an absent key is created")
	g.Expect(string(mustGet(ctx, g, c.Read, "presence/o").Value)).To(Equal("holder-b"))
	g.Expect(again.Release(ctx)).To(Succeed())
}

// A key written after the revision the caller saw (overwritten, or
// deleted and created again with the very same value) is never
// overwritten: the error names the current holder and revision.
func testPresenceTakeOverStale(t *testing.T, c PresenceClients) {
	for _, tc := range []struct {
		name    string
		rewrite func(ctx context.Context, g Gomega)
		holder  string
	}{
		{"overwritten", func(ctx context.Context, g Gomega) {
			g.Expect(c.Read.Put(ctx, "presence/s", []byte("holder-c"))).To(Succeed())
		}, "holder-c"},
		{"deleted and created again", func(ctx context.Context, g Gomega) {
			_, err := c.Read.Delete(ctx, "presence/s")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Read.Put(ctx, "presence/s", []byte("holder-a"))).To(Succeed())
		}, "holder-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := t.Context()
			pres, err := c.A.ClaimPresence(ctx, "presence/s", []byte("holder-a"), 5*time.Second)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = pres.Release(ctx) }()
			_, err = c.B.ClaimPresence(ctx, "presence/s", []byte("holder-b"), 5*time.Second)
			var seen *kvdb.PresenceHeldError
			g.Expect(errors.As(err, &seen)).To(BeTrue(), "error %v", err)

			tc.rewrite(ctx, g)
			now := mustGet(ctx, g, c.Read, "presence/s")
			_, err = c.B.TakeOverPresence(ctx, "presence/s", []byte("holder-b"), 5*time.Second, seen.Revision)
			var held *kvdb.PresenceHeldError
			g.Expect(errors.As(err, &held)).To(BeTrue(), "error %v", err)
			g.Expect(string(held.Holder)).To(Equal(tc.holder))
			g.Expect(held.Revision).To(Equal(now.Revision))
			g.Expect(mustGet(ctx, g, c.Read, "presence/s")).To(Equal(now), "nothing written")
			_, err = c.Read.Delete(ctx, "presence/s")
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func testPresenceCrash(t *testing.T, c PresenceClients) {
	g := NewWithT(t)
	ctx := t.Context()
	pres, err := c.A.ClaimPresence(ctx, "presence/c", []byte("holder-a"), time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	c.Crash()
	g.Eventually(pres.Lost()).WithTimeout(presenceWait).Should(BeClosed())

	var mine kvdb.Presence
	g.Eventually(func() error {
		mine, err = c.B.ClaimPresence(ctx, "presence/c", []byte("holder-b"), time.Second)
		return err
	}).WithTimeout(presenceWait).WithPolling(100*time.Millisecond).Should(Succeed(), "the crashed holder's lease expires")
	g.Expect(string(mustGet(ctx, g, c.Read, "presence/c").Value)).To(Equal("holder-b"))
	g.Expect(mine.Release(ctx)).To(Succeed())
}

func testPresenceInvalid(t *testing.T, c PresenceClients) {
	g := NewWithT(t)
	ctx := t.Context()
	_, err := c.A.ClaimPresence(ctx, "", []byte("x"), time.Second)
	g.Expect(err).To(MatchError(kvdb.ErrInvalidKey))
	_, err = c.A.ClaimPresence(ctx, "presence/big", make([]byte, kvdb.MaxValueLen+1), time.Second)
	g.Expect(err).To(MatchError(kvdb.ErrValueTooLarge))
	_, err = c.A.ClaimPresence(ctx, "presence/short", []byte("x"), 500*time.Millisecond)
	g.Expect(err).To(MatchError(ContainSubstring(`presence "presence/short": ttl 500ms, want at least 1s`)))
	_, err = c.A.TakeOverPresence(ctx, "", []byte("x"), time.Second, 1)
	g.Expect(err).To(MatchError(kvdb.ErrInvalidKey))
	_, err = c.A.TakeOverPresence(ctx, "presence/short", []byte("x"), 500*time.Millisecond, 1)
	g.Expect(err).To(MatchError(ContainSubstring(`presence "presence/short": ttl 500ms, want at least 1s`)))
	kvs, _, err := c.Read.List(ctx, "presence/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keysOf(kvs)).To(BeEmpty(), "nothing written: %s", strings.Join(keysOf(kvs), ","))
}
