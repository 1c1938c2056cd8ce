package cidr_test

import (
	"errors"
	"math/big"
	"net/netip"
	"testing"

	"github.com/contiv-ipam/agent/engine/cidr"
)

// The reference: the same operations done the slow, obvious way, with
// addresses as big.Int numbers. It shares no code with the package.

var (
	one    = big.NewInt(1)
	maxU64 = new(big.Int).SetUint64(^uint64(0))
)

func pow2(n int) *big.Int { return new(big.Int).Lsh(one, uint(n)) }

func num(a netip.Addr) *big.Int { return new(big.Int).SetBytes(a.AsSlice()) }

// fromNum is the address of v in a family of width bits; false if v does
// not fit.
func fromNum(v *big.Int, width int) (netip.Addr, bool) {
	if v.Sign() < 0 || v.BitLen() > width {
		return netip.Addr{}, false
	}
	a, _ := netip.AddrFromSlice(v.FillBytes(make([]byte, width/8)))
	return a, true
}

// refPrefix is p as numbers: its first address, its size and the width of
// its family.
type refPrefix struct {
	first, size *big.Int
	bits, width int
}

func newRef(p netip.Prefix) refPrefix {
	w := p.Addr().BitLen()
	h := w - p.Bits()
	first := new(big.Int).Rsh(num(p.Addr()), uint(h))
	first.Lsh(first, uint(h))
	return refPrefix{first: first, size: pow2(h), bits: p.Bits(), width: w}
}

// offset is a-first when a is inside the prefix (the package rules:
// zones outside, IPv4-mapped as IPv4 in an IPv4 prefix).
func (r refPrefix) offset(a netip.Addr) (*big.Int, bool) {
	if a.Zone() != "" {
		return nil, false
	}
	if r.width == 32 && a.Is4In6() {
		a = a.Unmap()
	}
	if a.BitLen() != r.width {
		return nil, false
	}
	d := new(big.Int).Sub(num(a), r.first)
	return d, d.Sign() >= 0 && d.Cmp(r.size) < 0
}

func (r refPrefix) at(off *big.Int) netip.Addr {
	a, _ := fromNum(new(big.Int).Add(r.first, off), r.width)
	return a
}

// fuzzAddr builds the address of a fuzz input: mode 0 takes raw bytes, 1
// the address at offset n of p, 2 that one IPv4-mapped, 3 that one with a
// zone.
func fuzzAddr(p netip.Prefix, raw []byte, mode uint8, n uint64) netip.Addr {
	if mode%4 == 0 || !p.IsValid() {
		a, _ := netip.AddrFromSlice(raw)
		return a
	}
	r := newRef(p)
	a := r.at(new(big.Int).Mod(new(big.Int).SetUint64(n), r.size))
	switch mode % 4 {
	case 2:
		return netip.AddrFrom16(a.As16())
	case 3:
		return netip.AddrFrom16(a.As16()).WithZone("eth0")
	}
	return a
}

func wantErr(t *testing.T, op string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", op, err, want)
	}
	if err != nil && err.Error() == "" {
		t.Fatalf("%s: empty error message", op)
	}
}

func FuzzAgainstBigInt(f *testing.F) {
	f.Add([]byte{10, 1, 5, 0}, uint8(24), []byte{10, 1, 5, 9}, uint8(0), uint8(28), uint64(3))
	f.Add([]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(64), []byte{}, uint8(1), uint8(120), uint64(1<<63))
	f.Add([]byte{0, 0, 0, 0}, uint8(0), []byte{255, 255, 255, 255}, uint8(0), uint8(32), ^uint64(0))
	f.Add(make([]byte, 16), uint8(0), []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(0), uint8(64), uint64(5))
	f.Add([]byte{1, 2, 3, 4}, uint8(32), []byte{}, uint8(2), uint8(32), uint64(0))
	f.Add([]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, uint8(128), []byte{}, uint8(3), uint8(128), uint64(1))
	f.Add([]byte{10, 0, 0, 0}, uint8(33), []byte{10, 0, 0, 1}, uint8(0), uint8(200), uint64(7))
	f.Fuzz(func(t *testing.T, pb []byte, plen uint8, ab []byte, mode, sublen uint8, n uint64) {
		pa, ok := netip.AddrFromSlice(pb)
		if !ok {
			return
		}
		// Lengths up to one past the family: the last one is invalid.
		p := netip.PrefixFrom(pa, int(plen)%(pa.BitLen()+2))
		a := fuzzAddr(p, ab, mode, n)
		bits := int(sublen)%131 - 1 // -1..129
		checkAddSub(t, a, n)
		if !p.IsValid() {
			checkInvalid(t, p, a, bits, n)
			return
		}
		r := newRef(p)
		checkAddr(t, p, r, n)
		checkOffset(t, p, r, a)
		checkSubnet(t, p, r, bits, n)
		checkSubnetIndex(t, p, r, bits, a)
		checkBlock(t, p, r, a, n)
		if got, want := cidr.Last(p), r.at(new(big.Int).Sub(r.size, one)); got != want {
			t.Fatalf("Last(%s) = %s, want %s", p, got, want)
		}
		if got := cidr.HostBits(p); got != r.width-r.bits {
			t.Fatalf("HostBits(%s) = %d", p, got)
		}
	})
}

func checkInvalid(t *testing.T, p netip.Prefix, a netip.Addr, bits int, n uint64) {
	t.Helper()
	_, err := cidr.Addr(p, n)
	wantErr(t, "Addr", err, cidr.ErrInvalid)
	_, err = cidr.Offset(p, a)
	wantErr(t, "Offset", err, cidr.ErrInvalid)
	_, err = cidr.Subnet(p, bits, n)
	wantErr(t, "Subnet", err, cidr.ErrInvalid)
	_, err = cidr.SubnetIndex(p, bits, a)
	wantErr(t, "SubnetIndex", err, cidr.ErrInvalid)
	if cidr.Last(p).IsValid() || cidr.HostBits(p) != -1 {
		t.Fatalf("invalid prefix %s has a last address or host bits", p)
	}
	b := cidr.NewBlock(p)
	if _, ok := b.Offset(a); ok || b.Addr(n).IsValid() {
		t.Fatalf("Block of invalid prefix %s converts", p)
	}
}

func checkAddr(t *testing.T, p netip.Prefix, r refPrefix, n uint64) {
	t.Helper()
	got, err := cidr.Addr(p, n)
	off := new(big.Int).SetUint64(n)
	if off.Cmp(r.size) >= 0 {
		wantErr(t, "Addr", err, cidr.ErrOutOfRange)
		return
	}
	wantErr(t, "Addr", err, nil)
	if want := r.at(off); got != want {
		t.Fatalf("Addr(%s, %d) = %s, want %s", p, n, got, want)
	}
}

func checkOffset(t *testing.T, p netip.Prefix, r refPrefix, a netip.Addr) {
	t.Helper()
	got, err := cidr.Offset(p, a)
	d, in := r.offset(a)
	switch {
	case !a.IsValid():
		wantErr(t, "Offset", err, cidr.ErrInvalid)
	case !in:
		wantErr(t, "Offset", err, cidr.ErrOutOfRange)
	case d.Cmp(maxU64) > 0:
		wantErr(t, "Offset", err, cidr.ErrOverflow)
	default:
		wantErr(t, "Offset", err, nil)
		if got != d.Uint64() {
			t.Fatalf("Offset(%s, %s) = %d, want %s", p, a, got, d)
		}
	}
}

func checkSubnet(t *testing.T, p netip.Prefix, r refPrefix, bits int, i uint64) {
	t.Helper()
	got, err := cidr.Subnet(p, bits, i)
	if bits < r.bits || bits > r.width {
		wantErr(t, "Subnet", err, cidr.ErrInvalid)
		return
	}
	idx := new(big.Int).SetUint64(i)
	if idx.Cmp(pow2(bits-r.bits)) >= 0 {
		wantErr(t, "Subnet", err, cidr.ErrOutOfRange)
		return
	}
	wantErr(t, "Subnet", err, nil)
	want := netip.PrefixFrom(r.at(idx.Lsh(idx, uint(r.width-bits))), bits)
	if got != want {
		t.Fatalf("Subnet(%s, %d, %d) = %s, want %s", p, bits, i, got, want)
	}
}

func checkSubnetIndex(t *testing.T, p netip.Prefix, r refPrefix, bits int, a netip.Addr) {
	t.Helper()
	got, err := cidr.SubnetIndex(p, bits, a)
	d, in := r.offset(a)
	switch {
	case bits < r.bits || bits > r.width || !a.IsValid():
		wantErr(t, "SubnetIndex", err, cidr.ErrInvalid)
	case !in:
		wantErr(t, "SubnetIndex", err, cidr.ErrOutOfRange)
	case d.Rsh(d, uint(r.width-bits)).Cmp(maxU64) > 0:
		wantErr(t, "SubnetIndex", err, cidr.ErrOverflow)
	default:
		wantErr(t, "SubnetIndex", err, nil)
		if got != d.Uint64() {
			t.Fatalf("SubnetIndex(%s, %d, %s) = %d, want %s", p, bits, a, got, d)
		}
	}
}

func checkAddSub(t *testing.T, a netip.Addr, n uint64) {
	t.Helper()
	for _, op := range []struct {
		name string
		fn   func(netip.Addr, uint64) (netip.Addr, error)
		ref  func(x, y *big.Int) *big.Int
	}{{"Add", cidr.Add, new(big.Int).Add}, {"Sub", cidr.Sub, new(big.Int).Sub}} {
		got, err := op.fn(a, n)
		if !a.IsValid() {
			wantErr(t, op.name, err, cidr.ErrInvalid)
			continue
		}
		want, ok := fromNum(op.ref(num(a), new(big.Int).SetUint64(n)), a.BitLen())
		if !ok {
			wantErr(t, op.name, err, cidr.ErrOverflow)
			continue
		}
		wantErr(t, op.name, err, nil)
		if want = want.WithZone(a.Zone()); got != want {
			t.Fatalf("%s(%s, %d) = %s, want %s", op.name, a, n, got, want)
		}
	}
}

func checkBlock(t *testing.T, p netip.Prefix, r refPrefix, a netip.Addr, n uint64) {
	t.Helper()
	b := cidr.NewBlock(p)
	top := new(big.Int).Sub(r.size, one)
	if top.Cmp(maxU64) > 0 {
		top = maxU64
	}
	if b.MaxOffset() != top.Uint64() {
		t.Fatalf("Block(%s).MaxOffset() = %d, want %s", p, b.MaxOffset(), top)
	}
	off := new(big.Int).SetUint64(n)
	want := netip.Addr{}
	if off.Cmp(top) <= 0 {
		want = r.at(off)
	}
	if got := b.Addr(n); got != want {
		t.Fatalf("Block(%s).Addr(%d) = %s, want %s", p, n, got, want)
	}
	got, ok := b.Offset(a)
	d, in := r.offset(a)
	if wantOK := in && d.Cmp(top) <= 0; ok != wantOK || ok && got != d.Uint64() {
		t.Fatalf("Block(%s).Offset(%s) = %d, %v; want %v, %v", p, a, got, ok, d, wantOK)
	}
}
