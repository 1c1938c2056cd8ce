package pool

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
)

// Strategy is how a pool picks the address to hand out.
type Strategy string

// The strategies of v1alpha1.ContivIPPoolSpec.AllocationStrategy.
const (
	// LowestFree hands out the lowest free address of the whole pool.
	LowestFree Strategy = v1alpha1.LowestFree
	// NextFit hands out the first free address after the last one handed
	// out, wrapping around at the top of the pool.
	NextFit Strategy = v1alpha1.NextFit
)

// ErrInvalidSpec is matched by every error of ParseSpec (a *SpecError).
var ErrInvalidSpec = errors.New("invalid pool spec")

// MaxParts bounds the number of parts of a pool: the disjoint runs of
// addresses left after merging the entries and taking out the exclusions,
// each cut at IPv6 /64 boundaries. Each part is one ipalloc.Pool.
const MaxParts = 4096

// Range is an inclusive run of addresses, First <= Last, of one family.
type Range struct {
	First, Last netip.Addr
}

// String returns "first-last", or the address alone for a single one.
func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// Spec is a validated, normalised pool spec. Build it with ParseSpec; a
// Pool copies what it needs, so changing the fields afterwards changes no
// pool.
type Spec struct {
	// Prefix is the prefix length given to each IPAddress.
	Prefix int
	// Gateway is the network's gateway (the zero Addr when none); never
	// handed out.
	Gateway netip.Addr
	// Grace is how long a released address stays used before it is free.
	Grace time.Duration
	// Strategy is LowestFree or NextFit.
	Strategy Strategy

	ranges []Range // the addresses handed out: sorted, disjoint, not adjacent
	bits   int     // 32 or 128
}

// Ranges returns the addresses the pool hands out: sorted, disjoint, not
// adjacent runs, with the gateway, the exclusions and the reserved
// addresses of CIDR entries taken out. The slice is a copy.
func (s *Spec) Ranges() []Range { return slices.Clone(s.ranges) }

// Is6 reports whether the pool is IPv6.
func (s *Spec) Is6() bool { return s.bits == 128 }

// SpecError is the error of ParseSpec: the field, the index in it (-1 for
// a field that is not a list, or for the list as a whole), the value and
// what is wrong with it. It matches ErrInvalidSpec.
type SpecError struct {
	Field  string // "spec.addresses"
	Index  int    // -1 when not an item
	Value  string
	Reason string
}

func (e *SpecError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Reason)
	}
	return fmt.Sprintf("%s[%d] %q: %s", e.Field, e.Index, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidSpec) true.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

const (
	fieldAddresses = "spec.addresses"
	fieldExcluded  = "spec.excludedAddresses"
	fieldGateway   = "spec.gateway"
	fieldPrefix    = "spec.prefix"
	fieldGrace     = "spec.addressReuseGracePeriod"
	fieldStrategy  = "spec.allocationStrategy"
)

// entry is one parsed item of addresses or excludedAddresses.
type entry struct {
	r      Range
	prefix netip.Prefix // valid for a CIDR entry
}

// ParseSpec normalises spec (surrounding spaces trimmed, the default
// strategy filled), then validates it; the error is a *SpecError naming
// the field, the index and the value. See the package doc for the rules.
func ParseSpec(spec v1alpha1.ContivIPPoolSpec) (*Spec, error) {
	s := &Spec{Strategy: Strategy(strings.TrimSpace(spec.AllocationStrategy))}
	if s.Strategy == "" {
		s.Strategy = LowestFree
	}
	if s.Strategy != LowestFree && s.Strategy != NextFit {
		return nil, &SpecError{fieldStrategy, -1, spec.AllocationStrategy, "not LowestFree or NextFit"}
	}
	if g := spec.AddressReuseGracePeriod; g != nil {
		if g.Duration < 0 {
			return nil, &SpecError{fieldGrace, -1, g.Duration.String(), "negative"}
		}
		s.Grace = g.Duration
	}
	addrs, err := parseEntries(fieldAddresses, spec.Addresses, 0)
	if err != nil {
		return nil, err
	}
	s.bits = addrs[0].r.First.BitLen()
	excl, err := parseEntries(fieldExcluded, spec.ExcludedAddresses, s.bits)
	if err != nil {
		return nil, err
	}
	if err := s.parseNetwork(spec); err != nil {
		return nil, err
	}
	if err := checkSpan(addrs); err != nil {
		return nil, err
	}
	s.ranges = subtract(merge(ranges(addrs)), merge(s.takenOut(addrs, excl)))
	if len(s.ranges) == 0 {
		return nil, &SpecError{fieldAddresses, -1, strings.Join(spec.Addresses, ","), "no address left once the gateway, the exclusions and the network and broadcast addresses of CIDRs are taken out"}
	}
	if countParts(s.ranges) > MaxParts {
		return nil, &SpecError{fieldAddresses, -1, strings.Join(spec.Addresses, ","), fmt.Sprintf("the pool needs more than %d parts (runs of addresses, cut at IPv6 /64 boundaries)", MaxParts)}
	}
	return s, nil
}

// parseNetwork parses the prefix length and the gateway, of the family of
// s.bits.
func (s *Spec) parseNetwork(spec v1alpha1.ContivIPPoolSpec) error {
	if spec.Prefix < 0 || int(spec.Prefix) > s.bits {
		return &SpecError{fieldPrefix, -1, fmt.Sprint(spec.Prefix), fmt.Sprintf("not within 0-%d (%s)", s.bits, familyName(s.bits))}
	}
	s.Prefix = int(spec.Prefix)
	g := strings.TrimSpace(spec.Gateway)
	if g == "" {
		return nil
	}
	a, reason := parseAddr(g)
	if reason == "" && a.BitLen() != s.bits {
		reason = fmt.Sprintf("not %s, the family of the pool", familyName(s.bits))
	}
	if reason != "" {
		return &SpecError{fieldGateway, -1, spec.Gateway, reason}
	}
	s.Gateway = a
	return nil
}

// takenOut returns what is never handed out: the exclusions, the gateway
// and the reserved addresses of the CIDR entries (see cidrReserved).
func (s *Spec) takenOut(addrs, excl []entry) []Range {
	out := ranges(excl)
	if s.Gateway.IsValid() {
		out = append(out, Range{s.Gateway, s.Gateway})
	}
	for _, e := range addrs {
		for _, a := range cidrReserved(e.prefix) {
			out = append(out, Range{a, a})
		}
	}
	return out
}

// cidrReserved returns the addresses of a CIDR entry that are not handed
// out: for IPv4 shorter than /31 the network and broadcast addresses, for
// IPv6 shorter than /127 the subnet-router anycast address (the first).
func cidrReserved(p netip.Prefix) []netip.Addr {
	switch {
	case !p.IsValid():
		return nil
	case p.Addr().Is4() && p.Bits() < 31:
		return []netip.Addr{p.Addr(), lastOf(p)}
	case p.Addr().Is6() && p.Bits() < 127:
		return []netip.Addr{p.Addr()}
	}
	return nil
}

// parseEntries parses the items of field; bits is the family they must
// have (0: the family of the first item). The list must not be empty when
// bits is 0.
func parseEntries(field string, items []string, bits int) ([]entry, error) {
	if bits == 0 && len(items) == 0 {
		return nil, &SpecError{field, -1, "", "no address"}
	}
	out := make([]entry, 0, len(items))
	for i, raw := range items {
		e, reason := parseEntry(strings.TrimSpace(raw))
		if reason == "" && bits == 0 {
			bits = e.r.First.BitLen()
		}
		if reason == "" && e.r.First.BitLen() != bits {
			reason = fmt.Sprintf("not %s, the family of the pool", familyName(bits))
		}
		if reason != "" {
			return nil, &SpecError{field, i, raw, reason}
		}
		out = append(out, e)
	}
	return out, nil
}

// parseEntry parses an IP, a range first-last or a CIDR; the reason is
// empty when s is valid.
func parseEntry(s string) (entry, string) {
	switch {
	case s == "":
		return entry{}, "empty"
	case strings.Contains(s, "/"):
		return parseCIDR(s)
	case strings.Contains(s, "-"):
		return parseRange(s)
	}
	a, reason := parseAddr(s)
	return entry{r: Range{a, a}}, reason
}

func parseCIDR(s string) (entry, string) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return entry{}, "not a CIDR: " + err.Error()
	}
	if _, reason := parseAddr(p.Addr().String()); reason != "" {
		return entry{}, reason
	}
	if m := p.Masked(); m != p {
		return entry{}, fmt.Sprintf("host bits set (the network is %s)", m)
	}
	return entry{r: Range{p.Addr(), lastOf(p)}, prefix: p}, ""
}

func parseRange(s string) (entry, string) {
	lo, hi, _ := strings.Cut(s, "-")
	first, reason := parseAddr(strings.TrimSpace(lo))
	if reason != "" {
		return entry{}, "the first address is " + reason
	}
	last, reason := parseAddr(strings.TrimSpace(hi))
	if reason != "" {
		return entry{}, "the last address is " + reason
	}
	if first.BitLen() != last.BitLen() {
		return entry{}, "the range mixes IPv4 and IPv6"
	}
	if last.Less(first) {
		return entry{}, "the range ends before it starts"
	}
	return entry{r: Range{first, last}}, ""
}

// parseAddr parses an IP address, refusing zones and IPv4-mapped IPv6
// addresses; the reason is empty when s is valid.
func parseAddr(s string) (netip.Addr, string) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, "not an IP address: " + err.Error()
	case a.Zone() != "":
		return netip.Addr{}, "an address with a zone"
	case a.Is4In6():
		return netip.Addr{}, "an IPv4-mapped IPv6 address (write " + a.Unmap().String() + ")"
	}
	return a, ""
}

// checkSpan refuses an entry that alone would make more than MaxParts
// parts (an IPv6 entry over more than MaxParts /64s), before anything
// counts its addresses one /64 at a time.
func checkSpan(addrs []entry) error {
	for i, e := range addrs {
		if blocks64(e.r) > MaxParts {
			return &SpecError{fieldAddresses, i, e.String(), fmt.Sprintf("spans more than %d IPv6 /64s", MaxParts)}
		}
	}
	return nil
}

func (e entry) String() string {
	if e.prefix.IsValid() {
		return e.prefix.String()
	}
	return e.r.String()
}

func familyName(bits int) string {
	if bits == 32 {
		return "IPv4"
	}
	return "IPv6"
}

func ranges(es []entry) []Range {
	out := make([]Range, len(es))
	for i, e := range es {
		out[i] = e.r
	}
	return out
}

// merge sorts rs and merges the overlapping and adjacent ones.
func merge(rs []Range) []Range {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b Range) int { return a.First.Compare(b.First) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && touches(out[n-1], r) {
			if out[n-1].Last.Less(r.Last) {
				out[n-1].Last = r.Last
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// touches reports whether b, which starts at or after a, overlaps a or
// follows it directly.
func touches(a, b Range) bool {
	next := a.Last.Next()
	return !next.IsValid() || b.First.Compare(next) <= 0
}

// subtract returns in minus out; both are merged (sorted, disjoint).
func subtract(in, out []Range) []Range {
	var res []Range
	j := 0
	for _, r := range in {
		for j < len(out) && out[j].Last.Less(r.First) {
			j++
		}
		cur, ok := r, true
		for k := j; ok && k < len(out) && out[k].First.Compare(cur.Last) <= 0; k++ {
			if cur.First.Less(out[k].First) {
				res = append(res, Range{cur.First, out[k].First.Prev()})
			}
			cur.First = out[k].Last.Next()
			ok = cur.First.IsValid() && cur.First.Compare(cur.Last) <= 0
		}
		if ok {
			res = append(res, cur)
		}
	}
	return res
}

// lastOf returns the last address of the masked prefix p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := range b {
		if host := p.Bits() - 8*i; host < 8 {
			b[i] |= 0xff >> max(host, 0)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// blocks64 returns the number of IPv6 /64s r touches (1 for IPv4),
// saturating at MaxParts+1.
func blocks64(r Range) int {
	if r.First.Is4() {
		return 1
	}
	f, l := r.First.As16(), r.Last.As16()
	d := be64(l[:8]) - be64(f[:8])
	return int(min(d, MaxParts) + 1)
}

func countParts(rs []Range) int {
	n := 0
	for _, r := range rs {
		n += blocks64(r)
	}
	return n
}

func be64(b []byte) uint64 {
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}
