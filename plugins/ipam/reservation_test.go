package ipam_test

import (
	"context"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/ipam"
)

// The interleavings of a confirmation (ConfirmAttachment) with the other
// writes of its attachment and with the expiry sweep, each pinned by a
// gate on the attachment's record.

const c1Key = ipam.AttachmentPrefix + "net/c1/eth0"

// gatedConfirm starts a dual-stack node with 1-minute reservations, adds
// c1 from a client that confirms, then gates the next write of c1's
// record and starts the confirmation in the background: it returns once
// the confirmation's write waits at the gate.
func gatedConfirm(t *testing.T, g Gomega, fdb *faultDB, clk *fakeClock) (*ipam.Plugin, *gate, *call) {
	t.Helper()
	i := mustFixture(t, fixtureOpts{db: fdb, yaml: dualStackConfig, clock: clk, resv: time.Minute, grace: 100 * time.Hour}, nil).ipam
	ev, err := addConfirming(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	gt := newGate(c1Key)
	fdb.setDecide(gt.decide)
	confirm := async(func() (net.IP, error) {
		return nil, i.ConfirmAttachment(context.Background(), att("c1", "eth0"), ev.Reservation)
	})
	g.Eventually(gt.entered).Should(Receive())
	return i, gt, confirm
}

func heldV4(i *ipam.Plugin) int {
	v4, _, _ := i.Dump()
	return len(v4)
}

// A DEL of the attachment in flight: the confirmation waits for it (it is
// in the lane of the attachment's pod) and then fails, since nothing is
// held any more; the DEL's delete is not undone by a late confirmation.
func TestAConfirmWaitsForTheDeleteInFlightAndFails(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	clk := newFakeClock()
	i := mustFixture(t, fixtureOpts{db: fdb, yaml: dualStackConfig, clock: clk, resv: time.Minute}, nil).ipam
	ev, err := addConfirming(i, pod1, att("c1", "eth0"))
	g.Expect(err).NotTo(HaveOccurred())
	gt := newGate(c1Key)
	fdb.setDecide(gt.decide)

	del := async(func() (net.IP, error) { _, err := deletePod(i, pod1, att("c1", "eth0")); return nil, err })
	g.Eventually(gt.entered).Should(Receive())
	confirm := async(func() (net.IP, error) {
		return nil, i.ConfirmAttachment(context.Background(), att("c1", "eth0"), ev.Reservation)
	})
	waitQueuedOrReturned(g, i, confirm)
	g.Expect(confirm.returned()).To(BeFalse(), "the confirmation waits for the delete of its attachment")
	gt.open <- pass

	g.Expect(del.wait(g).err).NotTo(HaveOccurred())
	g.Expect(confirm.wait(g).err).To(MatchError(ipam.ErrReservationMismatch))
	_, found, err := db.Get(context.Background(), c1Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeFalse(), "no record comes back")
	g.Expect(heldV4(i)).To(BeZero())
}

// The deadline passes while the confirmation is being stored: the sweep
// waits for it (a barrier), finds the allocation confirmed and releases
// nothing, then or ever.
func TestTheSweepWaitsForAConfirmInFlight(t *testing.T) {
	g := NewWithT(t)
	fdb, db := boltFaults(t)
	clk := newFakeClock()
	i, gt, confirm := gatedConfirm(t, g, fdb, clk)
	clk.Advance(2 * time.Minute)
	gt.open <- pass
	g.Expect(confirm.wait(g).err).NotTo(HaveOccurred())
	clk.Advance(time.Hour)
	g.Consistently(func() int { return heldV4(i) }, "100ms").Should(Equal(1))
	kv, found, err := db.Get(context.Background(), c1Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(string(kv.Value)).NotTo(ContainSubstring("reservation"), "the record is stored confirmed")
}

// A confirmation that cannot be stored fails, and the reservation stays:
// the addresses are released at its deadline, as if no confirmation had
// come (the ADD failed, the runtime deletes it anyway).
func TestAFailedConfirmLeavesTheReservationToExpire(t *testing.T) {
	g := NewWithT(t)
	fdb, _ := boltFaults(t)
	clk := newFakeClock()
	i, gt, confirm := gatedConfirm(t, g, fdb, clk)
	gt.open <- failBefore
	g.Expect(confirm.wait(g).err).To(MatchError(ContainSubstring(errInjected.Error())))
	g.Expect(heldV4(i)).To(Equal(1))
	clk.Advance(time.Minute)
	g.Eventually(func() int { return heldV4(i) }).Should(BeZero())
	_, v6, _ := i.Dump()
	g.Expect(v6).To(BeEmpty())
}
