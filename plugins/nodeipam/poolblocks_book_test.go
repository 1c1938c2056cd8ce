package nodeipam

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func TestPoolBookTakeHoldDrop(t *testing.T) {
	g := NewWithT(t)
	b, err := newPoolBook(poolConfig("10.64.0.0/24", "fd00:64::/118"))
	g.Expect(err).NotTo(HaveOccurred())
	v4, v6 := b.sets["ipv4"], b.sets["ipv6"]
	blk := netip.MustParsePrefix

	// take: next-fit, never a block of skip (given back after).
	p, err := b.take("a", "ipv4", map[netip.Prefix]bool{blk("10.64.0.0/26"): true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(blk("10.64.0.64/26")))
	g.Expect(v4.Used()).To(Equal(uint64(1)), "the skipped block is free again")
	p, err = b.take("a", "ipv6", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(blk("fd00:64::/120")))
	g.Expect(v6.Used()).To(Equal(uint64(1)))

	// hold: idempotent for the holder; another node shares; outside.
	outside, other := b.hold("a", blk("10.64.0.64/26"))
	g.Expect(outside).To(BeFalse())
	g.Expect(other).To(BeEmpty())
	_, other = b.hold("b", blk("10.64.0.64/26"))
	g.Expect(other).To(Equal("a"))
	outside, _ = b.hold("b", blk("192.168.0.0/26"))
	g.Expect(outside).To(BeTrue())
	outside, _ = b.hold("b", blk("fd00:65::/120"))
	g.Expect(outside).To(BeTrue())
	g.Expect(v4.Used()).To(Equal(uint64(1)))

	// drop: a shared block passes to the other holder, then is freed.
	g.Expect(b.drop("a", blk("10.64.0.64/26"))).To(Equal(0))
	g.Expect(b.owner[blk("10.64.0.64/26")]).To(Equal("b"))
	g.Expect(b.drop("a", blk("10.64.0.64/26"))).To(Equal(0), "dropping twice is a no-op")
	g.Expect(b.drop("b", blk("10.64.0.64/26"))).To(Equal(1))
	g.Expect(v4.Used()).To(BeZero())
	g.Expect(b.owner).To(HaveLen(1))
	g.Expect(b.shared).To(BeEmpty())

	// A full range, and a family without one.
	for range 4 {
		_, err = b.take("c", "ipv4", nil)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = b.take("c", "ipv4", nil)
	g.Expect(err).To(MatchError(ErrNoCIDRsRemaining))
	only4, err := newPoolBook(poolConfig("10.64.0.0/24"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = only4.take("c", "ipv6", nil)
	g.Expect(err).To(MatchError(ErrNoCIDRsRemaining))
	g.Expect(only4.families()).To(Equal([]string{"ipv4"}))
}
