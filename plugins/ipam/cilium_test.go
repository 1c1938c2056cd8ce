package ipam_test

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam"
)

// reservations is the count of reservations awaiting confirmation in the
// status line of Dump.
func reservations(g Gomega, i *ipam.Plugin) string {
	_, _, status := i.Dump()
	const suffix = " reservations awaiting confirmation"
	last := status[strings.LastIndex(status, "; ")+2:]
	g.Expect(last).To(HaveSuffix(suffix), "status %q", status)
	return strings.TrimSuffix(last, suffix)
}

// AllocateNextWithExpiration("") gives each address a timer of its own,
// as Cilium does: its own ID, stopped, started and expiring alone.
func TestEachAddressOfAnAllocateNextHasItsOwnExpirationTimer(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk}, nil).ipam
	v4, v6, err := i.AllocateNextWithExpiration("", "router", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v4.IP.String()).To(Equal("1.2.128.18"))
	g.Expect(v6.IP.String()).To(Equal("fe10:f00d::a"))
	g.Expect(v4.ExpirationUUID).NotTo(BeEmpty())
	g.Expect(v6.ExpirationUUID).NotTo(BeEmpty())
	g.Expect(v4.ExpirationUUID).NotTo(Equal(v6.ExpirationUUID))
	g.Expect(reservations(g, i)).To(Equal("2"))

	g.Expect(i.StopExpirationTimer(v6.IP, v4.ExpirationUUID)).To(MatchError(ipam.ErrReservationMismatch), "the other address's ID")
	g.Expect(i.StopExpirationTimer(v4.IP, v4.ExpirationUUID)).To(Succeed())
	g.Expect(i.StopExpirationTimer(v4.IP, v4.ExpirationUUID)).To(MatchError(ipam.ErrReservationMismatch), "stopped already")
	_, err = i.StartExpirationTimer(v6.IP, time.Minute)
	g.Expect(err).To(MatchError(ipam.ErrTimerExists), "the IPv6 address still has its own")
	g.Expect(reservations(g, i)).To(Equal("1"))

	clk.Advance(time.Minute)
	g.Eventually(func() map[string]string { _, m, _ := i.Dump(); return m }).Should(BeEmpty(), "the IPv6 timer fires")
	g.Consistently(func() map[string]string { m, _, _ := i.Dump(); return m }, "50ms").
		Should(Equal(map[string]string{"1.2.128.18": "router"}), "the stopped IPv4 timer does not")

	// A new timer on the IPv4 address: a new ID, that address alone.
	id, err := i.StartExpirationTimer(v4.IP, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).NotTo(BeElementOf(v4.ExpirationUUID, v6.ExpirationUUID, ""))
	clk.Advance(time.Minute)
	g.Eventually(func() map[string]string { m, _, _ := i.Dump(); return m }).Should(BeEmpty())
	g.Expect(reservations(g, i)).To(Equal("0"))
}

// ReleaseIP of one address of an AllocateNext("") gives back that address
// only, as Cilium does; ReleaseIPString of the owner gives back the rest.
func TestReleaseIPOfAnAllocateNextReleasesThatAddressOnly(t *testing.T) {
	g := NewWithT(t)
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig}, nil).ipam
	v4, v6, err := i.AllocateNext("", "router")
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = i.AllocateNext("", "dns")
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(i.ReleaseIP(v4.IP)).To(Succeed())
	all4, all6, _ := i.Dump()
	g.Expect(all4).To(Equal(map[string]string{"1.2.128.19": "dns"}))
	g.Expect(all6).To(Equal(map[string]string{v6.IP.String(): "router", "fe10:f00d::b": "dns"}))
	g.Expect(i.ReleaseIP(v4.IP)).To(MatchError(ipam.ErrNotAllocated))

	g.Expect(i.ReleaseIPString("router")).To(Succeed())
	all4, all6, _ = i.Dump()
	g.Expect(all4).To(Equal(map[string]string{"1.2.128.19": "dns"}))
	g.Expect(all6).To(Equal(map[string]string{"fe10:f00d::b": "dns"}))
	g.Expect(i.ReleaseIPString("router")).To(MatchError(ipam.ErrNotAllocated))
}

// AllocateNext("") is all or nothing: with the IPv6 subnet full, the IPv4
// address taken first is given back, and so is the pool's cursor (the
// same address is the next one handed out); nothing is stored.
func TestAllocateNextOfBothFamiliesIsAllOrNothing(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ipam.db")
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{yaml: dualStackConfig, db: db}, nil)
	i := f.ipam
	for range 4 {
		_, err := i.AllocateNextFamily(ipam.IPv6, "fill")
		g.Expect(err).NotTo(HaveOccurred())
	}
	v4, v6, err := i.AllocateNextWithExpiration("", "router", time.Minute)
	g.Expect(errors.Is(err, ipalloc.ErrPoolExhausted)).To(BeTrue(), "%v", err)
	g.Expect(v4).To(BeNil())
	g.Expect(v6).To(BeNil())
	all4, _, _ := i.Dump()
	g.Expect(all4).To(BeEmpty())
	g.Expect(reservations(g, i)).To(Equal("0"))
	g.Expect(i.ReleaseIPString("router")).To(MatchError(ipam.ErrNotAllocated))

	next, err := i.AllocateNextFamily(ipam.IPv4, "dns")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next.IP.String()).To(Equal("1.2.128.18"), "the rolled-back address")

	// After a restart: the same allocations, none of router's.
	f.close(t)
	g.Expect(db.Close()).To(Succeed())
	db = openBolt(t, path)
	t.Cleanup(func() { _ = db.Close() })
	i = mustFixture(t, fixtureOpts{yaml: dualStackConfig, db: db}, nil).ipam
	all4, all6, _ := i.Dump()
	g.Expect(all4).To(Equal(map[string]string{"1.2.128.18": "dns"}))
	g.Expect(all6).To(HaveLen(4))
	g.Expect(all6).To(HaveEach("fill"))
}

// Each address's timer is stored with its own allocation: after a
// restart the IDs still stop their own address's timer, and an address
// whose timer was stopped stays.
func TestPerAddressTimersSurviveARestart(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "ipam.db")
	clk := newFakeClock()
	db := openBolt(t, path)
	f := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk, db: db}, nil)
	v4, v6, err := f.ipam.AllocateNextWithExpiration("", "router", 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	a4, a6, err := f.ipam.AllocateNextWithExpiration("", "health", 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.ipam.StopExpirationTimer(v4.IP, v4.ExpirationUUID)).To(Succeed())
	f.close(t)
	g.Expect(db.Close()).To(Succeed())

	clk.Advance(time.Minute)
	db = openBolt(t, path)
	t.Cleanup(func() { _ = db.Close() })
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk, db: db}, nil).ipam
	g.Expect(reservations(g, i)).To(Equal("3"))
	g.Expect(i.StopExpirationTimer(v6.IP, v4.ExpirationUUID)).To(MatchError(ipam.ErrReservationMismatch))
	g.Expect(i.StopExpirationTimer(a6.IP, a6.ExpirationUUID)).To(Succeed())
	clk.Advance(time.Minute) // the deadline of the timers not stopped
	g.Eventually(func() int { m, _, _ := i.Dump(); return len(m) }).Should(Equal(1))
	all4, all6, _ := i.Dump()
	g.Expect(all4).To(Equal(map[string]string{v4.IP.String(): "router"}))
	g.Expect(all6).To(Equal(map[string]string{a6.IP.String(): "health"}))
	g.Expect(all4).NotTo(HaveKey(a4.IP.String()))
}

// An expiration timer is started on an allocation only: on an address
// nobody holds it is refused (a timer there would release whichever
// allocation takes the address later), and so is a stop.
func TestAnExpirationTimerOnAnAddressNobodyHoldsIsRefused(t *testing.T) {
	g := NewWithT(t)
	clk := newFakeClock()
	i := mustFixture(t, fixtureOpts{yaml: dualStackConfig, clock: clk}, nil).ipam
	i.BlacklistIP(net.ParseIP("1.2.128.20"), "appliance")
	for _, a := range []string{"1.2.128.19", "1.2.128.20", "1.2.128.17", "1.2.200.1", "fe10:f00d::c"} {
		_, err := i.StartExpirationTimer(net.ParseIP(a), time.Minute)
		g.Expect(err).To(MatchError(ipam.ErrNotAllocated), "start on %s", a)
		g.Expect(i.StopExpirationTimer(net.ParseIP(a), "any")).To(MatchError(ipam.ErrNotAllocated), "stop on %s", a)
	}
	g.Expect(i.AllocateIPString("1.2.128.19", "dns")).To(Succeed())
	g.Expect(reservations(g, i)).To(Equal("0"))
	clk.Advance(time.Hour)
	g.Consistently(func() map[string]string { m, _, _ := i.Dump(); return m }, "50ms").
		Should(Equal(map[string]string{"1.2.128.19": "dns"}))
}
