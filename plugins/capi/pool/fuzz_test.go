package pool

import (
	"math"
	"math/big"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
)

// FuzzParseSpec: ParseSpec never panics, and an accepted spec gives a pool
// whose Total is the number of addresses of its ranges (saturated), whose
// ranges are sorted, disjoint and of one family, without the gateway, and
// whose first allocations are inside them.
func FuzzParseSpec(f *testing.F) {
	f.Add("10.0.0.0/24,10.0.1.5-10.0.1.9", "10.0.0.7", "10.0.0.1", int32(24), "NextFit", int64(0))
	f.Add("2001:db8::/64,2001:db8:1::1", "2001:db8::/120", "2001:db8::1", int32(64), "", int64(30e9))
	f.Add("10.0.0.9-10.0.0.1", "", "", int32(33), "Random", int64(-1))
	f.Add("2001:db8::ffff:ffff:ffff:fff0-2001:db8:0:1::10", "2001:db8:0:1::", "", int32(64), "LowestFree", int64(1))
	f.Add("255.255.255.255,0.0.0.0/31", "0.0.0.1", "255.255.255.255", int32(0), "", int64(0))
	f.Fuzz(func(t *testing.T, addrs, excl, gw string, prefix int32, strategy string, grace int64) {
		spec := v1alpha1.ContivIPPoolSpec{
			Addresses:               split(addrs),
			ExcludedAddresses:       split(excl),
			Gateway:                 gw,
			Prefix:                  prefix,
			AllocationStrategy:      strategy,
			AddressReuseGracePeriod: &metav1.Duration{Duration: time.Duration(grace)},
		}
		s, err := ParseSpec(spec)
		if err != nil {
			if _, ok := err.(*SpecError); !ok {
				t.Fatalf("error %v is not a *SpecError", err)
			}
			return
		}
		checkRanges(t, s)
		p, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := p.Counts(t0).Total, total(s.Ranges()); got != want {
			t.Fatalf("Total %d, ranges %v hold %d", got, s.Ranges(), want)
		}
		for i := range 3 {
			a, err := p.Allocate(string(rune('a'+i)), t0)
			if err != nil {
				return
			}
			if a == s.Gateway || !inRanges(s.Ranges(), a) {
				t.Fatalf("allocated %s, outside %v or the gateway", a, s.Ranges())
			}
		}
	})
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func checkRanges(t *testing.T, s *Spec) {
	rs := s.Ranges()
	for i, r := range rs {
		if r.Last.Less(r.First) || r.First.BitLen() != rs[0].First.BitLen() {
			t.Fatalf("range %d %v invalid in %v", i, r, rs)
		}
		if i > 0 && !rs[i-1].Last.Next().Less(r.First) {
			t.Fatalf("ranges %v and %v not disjoint and apart", rs[i-1], r)
		}
		if s.Gateway.IsValid() && inRanges([]Range{r}, s.Gateway) {
			t.Fatalf("the gateway %s is in %v", s.Gateway, r)
		}
	}
}

func inRanges(rs []Range, a netip.Addr) bool {
	for _, r := range rs {
		if r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0 {
			return true
		}
	}
	return false
}

// total counts the addresses of rs in big numbers, saturating at MaxInt64;
// a whole /64 counts 2^64-1 (what ipalloc reports for it).
func total(rs []Range) int64 {
	sum := new(big.Int)
	for _, r := range rs {
		for _, c := range cut64(r) {
			n := new(big.Int).Sub(new(big.Int).SetBytes(c.Last.AsSlice()), new(big.Int).SetBytes(c.First.AsSlice()))
			if n.IsUint64() && n.Uint64() == math.MaxUint64 {
				n.Sub(n, big.NewInt(1))
			}
			sum.Add(sum, n.Add(n, big.NewInt(1)))
		}
	}
	if !sum.IsInt64() {
		return math.MaxInt64
	}
	return sum.Int64()
}
