package pool

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func rng(first, last string) Range { return Range{addr(first), addr(last)} }

func one(a string) Range { return rng(a, a) }

func TestParseSpecErrors(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.ContivIPPoolSpec
		want string // the whole message
	}{
		{"no addresses", v1alpha1.ContivIPPoolSpec{}, `spec.addresses "": no address`},
		{"v4 empty entry", spec("10.0.0.1", " "), `spec.addresses[1] " ": empty`},
		{"v4 not an IP", spec("10.0.0.1", "10.0.0.256"), `spec.addresses[1] "10.0.0.256": not an IP address: ParseAddr("10.0.0.256"): IPv4 field has value >255`},
		{"v6 not an IP", spec("2001:db8::1", "2001:db8::g"), `spec.addresses[1] "2001:db8::g": not an IP address: ParseAddr("2001:db8::g"): each colon-separated field must have at least one digit (at "g")`},
		{"v4 reversed range", spec("10.0.0.1", "10.0.0.2", "10.0.0.9-10.0.0.1"), `spec.addresses[2] "10.0.0.9-10.0.0.1": the range ends before it starts`},
		{"v6 reversed range", spec("2001:db8::9-2001:db8::1"), `spec.addresses[0] "2001:db8::9-2001:db8::1": the range ends before it starts`},
		{"v4 range mixing families", spec("10.0.0.1-2001:db8::1"), `spec.addresses[0] "10.0.0.1-2001:db8::1": the range mixes IPv4 and IPv6`},
		{"v6 range mixing families", spec("2001:db8::1-10.0.0.1"), `spec.addresses[0] "2001:db8::1-10.0.0.1": the range mixes IPv4 and IPv6`},
		{"v4 range bad last", spec("10.0.0.1-x"), `spec.addresses[0] "10.0.0.1-x": the last address is not an IP address: ParseAddr("x"): unable to parse IP`},
		{"v6 range bad first", spec("2001:db8::1%eth0-2001:db8::5"), `spec.addresses[0] "2001:db8::1%eth0-2001:db8::5": the first address is an address with a zone`},
		{"v4 host bits", spec("10.0.0.5/24"), `spec.addresses[0] "10.0.0.5/24": host bits set (the network is 10.0.0.0/24)`},
		{"v6 host bits", spec("2001:db8::1/64"), `spec.addresses[0] "2001:db8::1/64": host bits set (the network is 2001:db8::/64)`},
		{"v4 bad CIDR", spec("10.0.0.0/33"), `spec.addresses[0] "10.0.0.0/33": not a CIDR: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range`},
		{"v6 mapped", spec("::ffff:10.0.0.1"), `spec.addresses[0] "::ffff:10.0.0.1": an IPv4-mapped IPv6 address (write 10.0.0.1)`},
		{"v4 then v6", spec("10.0.0.0/24", "2001:db8::1"), `spec.addresses[1] "2001:db8::1": not IPv4, the family of the pool`},
		{"v6 then v4", spec("2001:db8::/64", "10.0.0.1"), `spec.addresses[1] "10.0.0.1": not IPv6, the family of the pool`},
		{"v4 exclusion of v6", with(spec("10.0.0.0/24"), func(s *v1alpha1.ContivIPPoolSpec) { s.ExcludedAddresses = []string{"10.0.0.1", "2001:db8::/64"} }), `spec.excludedAddresses[1] "2001:db8::/64": not IPv4, the family of the pool`},
		{"v6 bad exclusion", with(spec("2001:db8::/64"), func(s *v1alpha1.ContivIPPoolSpec) { s.ExcludedAddresses = []string{"2001:db8::5-2001:db8::1"} }), `spec.excludedAddresses[0] "2001:db8::5-2001:db8::1": the range ends before it starts`},
		{"v4 gateway of v6", with(spec("10.0.0.0/24"), func(s *v1alpha1.ContivIPPoolSpec) { s.Gateway = "2001:db8::1" }), `spec.gateway "2001:db8::1": not IPv4, the family of the pool`},
		{"v6 gateway not an IP", with(spec("2001:db8::/64"), func(s *v1alpha1.ContivIPPoolSpec) { s.Gateway = "2001:db8::/64" }), `spec.gateway "2001:db8::/64": not an IP address: ParseAddr("2001:db8::/64"): each colon-separated field must have at least one digit (at "/64")`},
		{"v4 prefix too long", with(spec("10.0.0.0/24"), func(s *v1alpha1.ContivIPPoolSpec) { s.Prefix = 33 }), `spec.prefix "33": not within 0-32 (IPv4)`},
		{"v6 prefix negative", with(spec("2001:db8::/64"), func(s *v1alpha1.ContivIPPoolSpec) { s.Prefix = -1 }), `spec.prefix "-1": not within 0-128 (IPv6)`},
		{"v4 nothing left", with(spec("10.0.0.1-10.0.0.2"), func(s *v1alpha1.ContivIPPoolSpec) { s.Gateway = "10.0.0.1"; s.ExcludedAddresses = []string{"10.0.0.2"} }), `spec.addresses "10.0.0.1-10.0.0.2": no address left once the gateway, the exclusions and the network and broadcast addresses of CIDRs are taken out`},
		{"v6 nothing left", with(spec("2001:db8::/128"), func(s *v1alpha1.ContivIPPoolSpec) { s.Gateway = "2001:db8::" }), `spec.addresses "2001:db8::/128": no address left once the gateway, the exclusions and the network and broadcast addresses of CIDRs are taken out`},
		{"v6 too wide", spec("2001:db8::/48"), `spec.addresses[0] "2001:db8::/48": spans more than 4096 IPv6 /64s`},
		{"v4 negative grace", with(spec("10.0.0.0/24"), func(s *v1alpha1.ContivIPPoolSpec) {
			s.AddressReuseGracePeriod = &metav1.Duration{Duration: -time.Second}
		}), `spec.addressReuseGracePeriod "-1s": negative`},
		{"v6 unknown strategy", with(spec("2001:db8::/64"), func(s *v1alpha1.ContivIPPoolSpec) { s.AllocationStrategy = "Random" }), `spec.allocationStrategy "Random": not LowestFree or NextFit`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := ParseSpec(tt.spec)
			g.Expect(err).To(MatchError(tt.want))
			g.Expect(errors.Is(err, ErrInvalidSpec)).To(BeTrue())
			var se *SpecError
			g.Expect(errors.As(err, &se)).To(BeTrue())
		})
	}
}

func TestParseSpecTooManyParts(t *testing.T) {
	g := NewWithT(t)
	// Two /53s are 4096 /64s: accepted; one more /64 is one part too many.
	_, err := ParseSpec(spec("2001:db8::/53", "2001:db9::/54"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = ParseSpec(spec("2001:db8::/53", "2001:db9::/53", "2001:dba::/64"))
	g.Expect(err).To(MatchError(ContainSubstring("the pool needs more than 4096 parts")))
}

func TestParseSpecRanges(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.ContivIPPoolSpec
		want []Range
	}{
		{"v4 CIDR without network and broadcast", spec("10.0.0.0/29"), []Range{rng("10.0.0.1", "10.0.0.6")}},
		{"v6 CIDR without subnet-router anycast", spec("2001:db8::/125"), []Range{rng("2001:db8::1", "2001:db8::7")}},
		{"v4 /31 and /32 whole", spec("10.0.0.0/31", "10.0.0.8/32"), []Range{rng("10.0.0.0", "10.0.0.1"), one("10.0.0.8")}},
		{"v6 /127 and /128 whole", spec("2001:db8::/127", "2001:db8::8/128"), []Range{rng("2001:db8::", "2001:db8::1"), one("2001:db8::8")}},
		{"v4 overlapping and adjacent merge", spec(" 10.0.0.5 - 10.0.0.9 ", "10.0.0.7-10.0.0.12", "10.0.0.13", "10.0.0.20"), []Range{rng("10.0.0.5", "10.0.0.13"), one("10.0.0.20")}},
		{"v6 overlapping and adjacent merge", spec("2001:db8::5-2001:db8::9", "2001:db8::7-2001:db8::c", "2001:db8::d", "2001:db8::20"), []Range{rng("2001:db8::5", "2001:db8::d"), one("2001:db8::20")}},
		{"v4 CIDR boundary wins over an IP", spec("10.0.0.0/30", "10.0.0.0"), []Range{rng("10.0.0.1", "10.0.0.2")}},
		{"v4 gateway and exclusions", with(spec("10.0.0.1-10.0.0.20"), func(s *v1alpha1.ContivIPPoolSpec) {
			s.Gateway = "10.0.0.1"
			s.ExcludedAddresses = []string{"10.0.0.5-10.0.0.7", "10.0.0.10/31", "10.0.0.20", "192.168.0.0/16"}
		}), []Range{rng("10.0.0.2", "10.0.0.4"), rng("10.0.0.8", "10.0.0.9"), rng("10.0.0.12", "10.0.0.19")}},
		{"v6 gateway and exclusions", with(spec("2001:db8::1-2001:db8::20"), func(s *v1alpha1.ContivIPPoolSpec) {
			s.Gateway = "2001:db8::1"
			s.ExcludedAddresses = []string{"2001:db8::5-2001:db8::7", "2001:db8::10/127", "2001:db8::20"}
		}), []Range{rng("2001:db8::2", "2001:db8::4"), rng("2001:db8::8", "2001:db8::f"), rng("2001:db8::12", "2001:db8::1f")}},
		{"v4 top of the family", spec("255.255.255.254-255.255.255.255", "255.255.255.250-255.255.255.253"), []Range{rng("255.255.255.250", "255.255.255.255")}},
		{"v6 exclusion at the top", with(spec("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), func(s *v1alpha1.ContivIPPoolSpec) {
			s.ExcludedAddresses = []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}
		}), []Range{rng("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := ParseSpec(tt.spec)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Ranges()).To(Equal(tt.want))
			g.Expect(s.Strategy).To(Equal(LowestFree))
		})
	}
}

func TestParseSpecFields(t *testing.T) {
	g := NewWithT(t)
	s, err := ParseSpec(v1alpha1.ContivIPPoolSpec{
		Addresses:               []string{"2001:db8::/64"},
		Prefix:                  64,
		Gateway:                 " 2001:db8::1 ",
		AddressReuseGracePeriod: &metav1.Duration{Duration: 30 * time.Second},
		AllocationStrategy:      "NextFit",
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Prefix).To(Equal(64))
	g.Expect(s.Gateway).To(Equal(addr("2001:db8::1")))
	g.Expect(s.Grace).To(Equal(30 * time.Second))
	g.Expect(s.Strategy).To(Equal(NextFit))
	g.Expect(s.Is6()).To(BeTrue())
	g.Expect(s.Ranges()).To(Equal([]Range{rng("2001:db8::2", "2001:db8::ffff:ffff:ffff:ffff")}))
}

func spec(addrs ...string) v1alpha1.ContivIPPoolSpec {
	s := v1alpha1.ContivIPPoolSpec{Addresses: addrs, Prefix: 24}
	if len(addrs) > 0 && strings.Contains(addrs[0], ":") {
		s.Prefix = 64
	}
	return s
}

func with(s v1alpha1.ContivIPPoolSpec, f func(*v1alpha1.ContivIPPoolSpec)) v1alpha1.ContivIPPoolSpec {
	f(&s)
	return s
}
