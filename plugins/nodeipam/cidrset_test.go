package nodeipam

import (
	"errors"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = mustPrefix(s)
	}
	return out
}

// AllocateNext hands out the blocks in order, skipping the excluded ones,
// until the range is full.
func TestCIDRSetAllocatesInOrderAndSkipsExcluded(t *testing.T) {
	cases := []struct {
		name    string
		cluster string
		mask    int
		exclude []netip.Prefix
		want    []string
	}{
		{"IPv4", "10.0.0.0/22", 24, nil, []string{"10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24"}},
		{"IPv6", "fd00::/62", 64, nil, []string{"fd00::/64", "fd00:0:0:1::/64", "fd00:0:0:2::/64", "fd00:0:0:3::/64"}},
		{"IPv4 service inside", "10.0.0.0/22", 24, prefixes("10.0.1.128/25"), []string{"10.0.0.0/24", "10.0.2.0/24", "10.0.3.0/24"}},
		{"IPv6 service inside", "fd00::/62", 64, prefixes("fd00:0:0:2::/112"), []string{"fd00::/64", "fd00:0:0:1::/64", "fd00:0:0:3::/64"}},
		{"IPv4 service over two blocks", "10.0.0.0/22", 24, prefixes("10.0.2.0/23"), []string{"10.0.0.0/24", "10.0.1.0/24"}},
		{"other family ignored", "10.0.0.0/23", 24, prefixes("fd00::/8"), []string{"10.0.0.0/24", "10.0.1.0/24"}},
		{"IPv4 block is the range", "10.0.0.0/24", 24, nil, []string{"10.0.0.0/24"}},
		{"IPv4 /32 nodes", "10.0.0.0/31", 32, nil, []string{"10.0.0.0/32", "10.0.0.1/32"}},
		{"IPv6 64 bits of blocks", "fd00::/64", 128, nil, []string{"fd00::/128", "fd00::1/128", "fd00::2/128"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := NewCIDRSet(mustPrefix(c.cluster), c.mask, c.exclude...)
			g.Expect(err).NotTo(HaveOccurred())
			var got []string
			for range len(c.want) {
				p, err := s.AllocateNext()
				g.Expect(err).NotTo(HaveOccurred())
				got = append(got, p.String())
			}
			g.Expect(got).To(Equal(c.want))
			if s.Size() == uint64(len(c.want)) {
				_, err = s.AllocateNext()
				g.Expect(errors.Is(err, ErrNoCIDRsRemaining)).To(BeTrue(), "full: %v", err)
				g.Expect(err.Error()).To(ContainSubstring(c.cluster))
			}
		})
	}
}

// Occupy and Release count only the blocks that change; a CIDR larger
// than a block covers several, a smaller one its block.
func TestCIDRSetOccupyReleaseAreIdempotent(t *testing.T) {
	g := NewWithT(t)
	s, err := NewCIDRSet(mustPrefix("10.0.0.0/16"), 24)
	g.Expect(err).NotTo(HaveOccurred())
	steps := []struct {
		op   string
		cidr string
		n    int
		used uint64
	}{
		{"occupy", "10.0.1.0/24", 1, 1},
		{"occupy", "10.0.1.0/24", 0, 1},
		{"occupy", "10.0.0.0/22", 3, 4},
		{"occupy", "10.0.7.5/28", 1, 5},
		{"release", "10.0.2.0/24", 1, 4},
		{"release", "10.0.2.0/24", 0, 4},
		{"release", "10.0.0.0/16", 4, 0},
	}
	for i, st := range steps {
		var n int
		if st.op == "occupy" {
			n, err = s.Occupy(mustPrefix(st.cidr))
		} else {
			n, err = s.Release(mustPrefix(st.cidr))
		}
		g.Expect(err).NotTo(HaveOccurred(), "step %d", i)
		g.Expect(n).To(Equal(st.n), "step %d: %s %s", i, st.op, st.cidr)
		g.Expect(s.Used()).To(Equal(st.used), "step %d", i)
	}
}

// Next-fit: a released block is handed out again only after the cursor
// went round.
func TestCIDRSetNextFitDoesNotReuseAtOnce(t *testing.T) {
	g := NewWithT(t)
	s, err := NewCIDRSet(mustPrefix("fd00::/126"), 128)
	g.Expect(err).NotTo(HaveOccurred())
	a, _ := s.AllocateNext()
	_, _ = s.AllocateNext()
	_, err = s.Release(a)
	g.Expect(err).NotTo(HaveOccurred())
	c, _ := s.AllocateNext()
	d, _ := s.AllocateNext()
	e, _ := s.AllocateNext()
	g.Expect([]string{c.String(), d.String(), e.String()}).To(Equal([]string{"fd00::2/128", "fd00::3/128", "fd00::/128"}))
}

// Bad ranges and sizes are refused with the values named.
func TestCIDRSetRefusesWhatDoesNotFit(t *testing.T) {
	cases := []struct {
		name    string
		cluster netip.Prefix
		mask    int
		exclude []netip.Prefix
		want    string
	}{
		{"mask shorter than range", mustPrefix("10.0.0.0/16"), 8, nil, "node mask size 8 for cluster CIDR 10.0.0.0/16"},
		{"mask longer than address", mustPrefix("10.0.0.0/16"), 33, nil, "want 16 to 32"},
		{"more than 64 bits of blocks", mustPrefix("fd00::/48"), 120, nil, "72 bits of blocks"},
		{"invalid range", netip.Prefix{}, 24, nil, "not valid"},
		{"service covers everything", mustPrefix("10.0.0.0/24"), 26, prefixes("10.0.0.0/16"), "cover every block"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := NewCIDRSet(c.cluster, c.mask, c.exclude...)
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}
}

// A CIDR outside the range is refused, one far larger than a block too.
func TestCIDRSetOccupyOutsideOrHuge(t *testing.T) {
	g := NewWithT(t)
	s, err := NewCIDRSet(mustPrefix("fd00::/48"), 112)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Occupy(mustPrefix("fd01::/112"))
	g.Expect(errors.Is(err, ErrOutsideCluster)).To(BeTrue())
	_, err = s.Occupy(mustPrefix("10.0.0.0/24"))
	g.Expect(errors.Is(err, ErrOutsideCluster)).To(BeTrue())
	_, err = s.Occupy(mustPrefix("fd00::/64"))
	g.Expect(err).To(MatchError(ContainSubstring("covers more than 65536 blocks")))
	g.Expect(s.Used()).To(BeZero())
}
