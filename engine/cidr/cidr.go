package cidr

import (
	"errors"
	"fmt"
	"net/netip"
)

// Sentinel errors; every error of the package wraps one of them.
var (
	// ErrInvalid: an invalid prefix or address, or a prefix length that
	// does not fit the prefix or its family.
	ErrInvalid = errors.New("invalid")
	// ErrOutOfRange: an offset or subnet number beyond the prefix, or an
	// address outside it.
	ErrOutOfRange = errors.New("out of range")
	// ErrOverflow: the result does not fit: past either end of the address
	// family, or an offset or subnet number of 2^64 or more.
	ErrOverflow = errors.New("overflow")
)

// HostBits returns the number of host bits of p (32 or 128 minus its
// length); -1 if p is invalid.
func HostBits(p netip.Prefix) int {
	if !p.IsValid() {
		return -1
	}
	return p.Addr().BitLen() - p.Bits()
}

// Addr returns the address at offset n of p: n = 0 is the first address of
// the masked prefix. The error wraps ErrInvalid for an invalid p and
// ErrOutOfRange when p has no more than n addresses.
func Addr(p netip.Prefix, n uint64) (netip.Addr, error) {
	if !p.IsValid() {
		return netip.Addr{}, fmt.Errorf("address at offset %d of %s: %w", n, p, ErrInvalid)
	}
	if hb := HostBits(p); hb < 64 && n>>hb != 0 {
		return netip.Addr{}, fmt.Errorf("address at offset %d of %s: it has %d addresses: %w", n, p.Masked(), uint64(1)<<hb, ErrOutOfRange)
	}
	b := NewBlock(p)
	return b.Addr(n), nil
}

// Offset returns the offset of a inside p, the inverse of Addr. The error
// wraps ErrInvalid for an invalid p or a, ErrOutOfRange when a is outside p
// (see the package rules on zones and IPv4-mapped addresses) and
// ErrOverflow when the offset is 2^64 or more.
func Offset(p netip.Prefix, a netip.Addr) (uint64, error) {
	d, err := distance(p, a)
	if err != nil {
		return 0, fmt.Errorf("offset of %s: %w", a, err)
	}
	if d.hi != 0 {
		return 0, fmt.Errorf("offset of %s in %s: 2^64 or more: %w", a, p.Masked(), ErrOverflow)
	}
	return d.lo, nil
}

// Last returns the last address of p (every host bit set); the zero Addr
// if p is invalid.
func Last(p netip.Prefix) netip.Addr {
	if !p.IsValid() {
		return netip.Addr{}
	}
	p = p.Masked()
	host := shl64(1, uint(HostBits(p))) // 2^hostBits; 0 for /0 of IPv6
	host, _ = host.sub(uint128{lo: 1})  // the host bits all set
	return fromAddr(p.Addr()).or(host).addr(p.Addr().Is4())
}

// Subnet returns subnet number i of length bits inside p: the bits-p.Bits()
// bits after p's prefix are i, the rest are zero. i = 0 is the first
// subnet; bits = p.Bits() gives p itself. The error wraps ErrInvalid for
// an invalid p or a length outside [p.Bits(), address length], and
// ErrOutOfRange when p has no more than i subnets of that length.
func Subnet(p netip.Prefix, bits int, i uint64) (netip.Prefix, error) {
	if err := checkLen(p, bits); err != nil {
		return netip.Prefix{}, fmt.Errorf("subnet /%d number %d: %w", bits, i, err)
	}
	p = p.Masked()
	if n := bits - p.Bits(); n < 64 && i>>n != 0 {
		return netip.Prefix{}, fmt.Errorf("subnet /%d number %d of %s: it has %d of them: %w",
			bits, i, p, uint64(1)<<n, ErrOutOfRange)
	}
	width := p.Addr().BitLen()
	a := fromAddr(p.Addr()).or(shl64(i, uint(width-bits)))
	return netip.PrefixFrom(a.addr(width == 32), bits), nil
}

// SubnetIndex returns the number of the subnet of length bits inside p
// that holds a, the inverse of Subnet. The error wraps ErrInvalid as for
// Subnet or for an invalid a, ErrOutOfRange when a is outside p, and
// ErrOverflow when the number is 2^64 or more.
func SubnetIndex(p netip.Prefix, bits int, a netip.Addr) (uint64, error) {
	if err := checkLen(p, bits); err != nil {
		return 0, fmt.Errorf("/%d subnet of %s: %w", bits, a, err)
	}
	d, err := distance(p, a)
	if err != nil {
		return 0, fmt.Errorf("/%d subnet of %s: %w", bits, a, err)
	}
	i := d.shr(uint(p.Addr().BitLen() - bits))
	if i.hi != 0 {
		return 0, fmt.Errorf("/%d subnet of %s in %s: its number is 2^64 or more: %w", bits, a, p.Masked(), ErrOverflow)
	}
	return i.lo, nil
}

// Add returns a+n, keeping a's zone. The error wraps ErrInvalid for an
// invalid a and ErrOverflow past the last address of a's family
// (255.255.255.255 for IPv4; an IPv4-mapped address counts as IPv6).
func Add(a netip.Addr, n uint64) (netip.Addr, error) {
	if !a.IsValid() {
		return netip.Addr{}, fmt.Errorf("%s + %d: %w", a, n, ErrInvalid)
	}
	u, carry := fromAddr(a).add64(n)
	if carry || !u.fits(a.BitLen()) {
		return netip.Addr{}, fmt.Errorf("%s + %d: past the last %s address: %w", a, n, family(a), ErrOverflow)
	}
	return u.addr(a.Is4()).WithZone(a.Zone()), nil
}

// Sub returns a-n, keeping a's zone. The error wraps ErrInvalid for an
// invalid a and ErrOverflow below the first address of a's family
// (0.0.0.0 or ::).
func Sub(a netip.Addr, n uint64) (netip.Addr, error) {
	if !a.IsValid() {
		return netip.Addr{}, fmt.Errorf("%s - %d: %w", a, n, ErrInvalid)
	}
	u, borrow := fromAddr(a).sub(uint128{lo: n})
	if borrow || !u.fits(a.BitLen()) {
		return netip.Addr{}, fmt.Errorf("%s - %d: below the first %s address: %w", a, n, family(a), ErrOverflow)
	}
	return u.addr(a.Is4()).WithZone(a.Zone()), nil
}

// checkLen checks that p is valid and bits is a subnet length of it.
func checkLen(p netip.Prefix, bits int) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("prefix %s: %w", p, ErrInvalid)
	case bits < p.Bits() || bits > p.Addr().BitLen():
		return fmt.Errorf("prefix length %d: not within %d..%d of %s: %w", bits, p.Bits(), p.Addr().BitLen(), p, ErrInvalid)
	}
	return nil
}

// distance returns a minus the first address of p when a is inside p.
func distance(p netip.Prefix, a netip.Addr) (uint128, error) {
	switch {
	case !p.IsValid():
		return uint128{}, fmt.Errorf("prefix %s: %w", p, ErrInvalid)
	case !a.IsValid():
		return uint128{}, fmt.Errorf("address %s: %w", a, ErrInvalid)
	}
	p = p.Masked()
	in, ok := member(p, a)
	if !ok {
		return uint128{}, fmt.Errorf("outside %s: %w", p, ErrOutOfRange)
	}
	d, _ := fromAddr(in).sub(fromAddr(p.Addr()))
	return d, nil
}

// member returns a as the masked prefix p sees it (an IPv4-mapped address
// unmapped in an IPv4 prefix) and whether it is inside p. A zone is
// outside every prefix.
func member(p netip.Prefix, a netip.Addr) (netip.Addr, bool) {
	if a.Zone() != "" {
		return a, false
	}
	if p.Addr().Is4() && a.Is4In6() {
		a = a.Unmap()
	}
	return a, p.Contains(a)
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
