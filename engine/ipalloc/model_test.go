package ipalloc

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/netip"

	"testing"
)

// model is the trivial reference the pool is compared with: a map of taken
// offsets and a linear next-fit search. Its window and address arithmetic
// uses big.Int, independent of the pool's (package cidr).
type model struct {
	lo, hi, top     uint64
	size            uint64
	reserved, taken map[uint64]bool
	cursor, cursor0 uint64
}

// newModel returns the model of cfg, or false if cfg has no allocatable
// address.
func newModel(cfg Config) (*model, bool) {
	if !cfg.Prefix.IsValid() {
		return nil, false
	}
	pfx := cfg.Prefix.Masked()
	n := new(big.Int).Lsh(big.NewInt(1), uint(pfx.Addr().BitLen()-pfx.Bits()))
	limit := new(big.Int).SetUint64(allOnes)
	last := new(big.Int).Sub(n, big.NewInt(1))
	last.Sub(last, new(big.Int).SetUint64(cfg.ReserveHigh))
	if last.Cmp(limit) > 0 {
		last = limit
	}
	if last.Sign() < 0 || last.Cmp(new(big.Int).SetUint64(cfg.ReserveLow)) < 0 {
		return nil, false
	}
	top := new(big.Int).Sub(n, big.NewInt(1))
	if top.Cmp(limit) > 0 {
		top = limit
	}
	m := &model{lo: cfg.ReserveLow, hi: last.Uint64(), top: top.Uint64(), reserved: map[uint64]bool{}, taken: map[uint64]bool{}}
	for _, a := range cfg.Reserved {
		if off, ok := refOffset(pfx, a); ok && off >= m.lo && off <= m.hi {
			m.reserved[off] = true
		}
	}
	size := new(big.Int).SetUint64(m.hi - m.lo)
	size.Add(size, big.NewInt(1)).Sub(size, big.NewInt(int64(len(m.reserved))))
	if size.Sign() <= 0 {
		return nil, false
	}
	if size.Cmp(limit) > 0 {
		size = limit
	}
	m.size = size.Uint64()
	m.cursor0 = m.hi
	if m.lo > 0 {
		m.cursor0 = m.lo - 1
	}
	m.cursor = m.cursor0
	return m, true
}

// refOffset is the offset of a from the first address of pfx, computed on
// big.Int numbers of the address bytes; false if a is outside pfx or the
// offset does not fit a uint64. It follows the package's rules: a zone is
// outside every pool, an IPv4-mapped address counts as its IPv4 address in
// an IPv4 pool.
func refOffset(pfx netip.Prefix, a netip.Addr) (uint64, bool) {
	if !pfx.IsValid() || !a.IsValid() || a.Zone() != "" {
		return 0, false
	}
	if pfx.Addr().Is4() && a.Is4In6() {
		a = a.Unmap()
	}
	first, size := refFirst(pfx)
	if a.BitLen() != pfx.Addr().BitLen() {
		return 0, false
	}
	d := new(big.Int).SetBytes(a.AsSlice())
	d.Sub(d, first)
	if d.Sign() < 0 || d.Cmp(size) >= 0 || !d.IsUint64() {
		return 0, false
	}
	return d.Uint64(), true
}

// refAddr is the address at offset off of pfx; the zero Addr beyond it.
func refAddr(pfx netip.Prefix, off uint64) netip.Addr {
	first, size := refFirst(pfx)
	v := new(big.Int).SetUint64(off)
	if v.Cmp(size) >= 0 {
		return netip.Addr{}
	}
	v.Add(v, first)
	a, _ := netip.AddrFromSlice(v.FillBytes(make([]byte, pfx.Addr().BitLen()/8)))
	return a
}

// refFirst is the first address of pfx (its host bits cleared) and the
// number of its addresses.
func refFirst(pfx netip.Prefix) (first, size *big.Int) {
	host := uint(pfx.Addr().BitLen() - pfx.Bits())
	first = new(big.Int).SetBytes(pfx.Addr().AsSlice())
	first.Rsh(first, host).Lsh(first, host)
	return first, new(big.Int).Lsh(big.NewInt(1), host)
}

func (m *model) inWindow(off uint64) bool { return off >= m.lo && off <= m.hi }

// next is the offset after off in next-fit order.
func (m *model) next(off uint64) uint64 {
	if off < m.lo || off >= m.hi {
		return m.lo
	}
	return off + 1
}

func (m *model) allocate() (uint64, error) {
	if uint64(len(m.taken)) >= m.size {
		return 0, ErrPoolExhausted
	}
	off := m.next(m.cursor)
	for m.taken[off] || m.reserved[off] {
		off = m.next(off)
	}
	m.taken[off] = true
	m.cursor = off
	return off, nil
}

func (m *model) allocateAt(off uint64) error {
	switch {
	case !m.inWindow(off):
		return ErrOutOfRange
	case m.reserved[off]:
		return ErrReserved
	case m.taken[off]:
		return ErrTaken
	}
	m.taken[off] = true
	return nil
}

func (m *model) release(off uint64) error {
	switch {
	case !m.inWindow(off):
		return ErrOutOfRange
	case m.reserved[off]:
		return errReservedRelease
	case !m.taken[off]:
		return ErrNotAllocated
	}
	delete(m.taken, off)
	return nil
}

func (m *model) setCursor(off uint64) error {
	if off > m.top {
		return ErrOutOfRange
	}
	m.cursor = off
	return nil
}

func (m *model) reset() {
	clear(m.taken)
	m.cursor = m.cursor0
}

// errKind names the sentinels err wraps, for comparing pool and model.
func errKind(err error) string {
	if err == nil {
		return "nil"
	}
	var kinds []string
	for _, s := range []struct {
		err  error
		name string
	}{{ErrPoolExhausted, "full"}, {ErrOutOfRange, "range"}, {ErrReserved, "reserved"}, {ErrTaken, "taken"}, {ErrNotAllocated, "notalloc"}} {
		if errors.Is(err, s.err) {
			kinds = append(kinds, s.name)
		}
	}
	if len(kinds) == 0 {
		return "other: " + err.Error()
	}
	return fmt.Sprint(kinds)
}

// opKind is one operation of a random or fuzzed sequence.
type opKind uint8

const (
	opAlloc opKind = iota
	opAllocAt
	opRelease
	opAllocAddr
	opReleaseAddr
	opSetCursor
	opIsAllocated
	opFill
	opReset
	numOps
)

type op struct {
	kind opKind
	off  uint64 // the offset argument; the count for opFill
}

// harness runs the same operations on pools and the model and reports the
// first difference.
type harness struct {
	pools []*Pool
	m     *model
	steps int
}

// result is what one operation returned.
type result struct {
	off uint64 // the allocated offset, or IsAllocated as 0/1
	err string // errKind of the error
}

func (h *harness) step(o op) error {
	if o.kind == opFill {
		for n := uint64(0); n < o.off && uint64(len(h.m.taken)) < h.m.size; n++ {
			if err := h.step(op{kind: opAlloc}); err != nil {
				return err
			}
		}
		return nil
	}
	h.steps++
	want := h.runModel(o)
	for i, p := range h.pools {
		if got := run(p, o); got != want {
			return fmt.Errorf("step %d %+v, pool %d (%T): got %+v, model %+v", h.steps, o, i, p.bits, got, want)
		}
		if err := h.invariants(p); err != nil {
			return fmt.Errorf("step %d %+v, pool %d (%T): %w", h.steps, o, i, p.bits, err)
		}
	}
	// Range costs O(allocated): check often while that is small.
	if every := 64; h.steps%every == 0 && (len(h.m.taken) < 1024 || h.steps%(every*64) == 0) {
		return h.check()
	}
	return nil
}

// runModel applies o to the model. The address forms get AddrAt(o.off),
// which is the zero Addr for an offset beyond the prefix: the model finds
// such an offset out of range by itself.
func (h *harness) runModel(o op) result {
	m := h.m
	var r result
	var err error
	switch o.kind {
	case opAlloc:
		r.off, err = m.allocate()
	case opAllocAt, opAllocAddr:
		err = m.allocateAt(o.off)
	case opRelease, opReleaseAddr:
		err = m.release(o.off)
	case opSetCursor:
		err = m.setCursor(o.off)
	case opIsAllocated:
		if m.taken[o.off] {
			r.off = 1
		}
	case opReset:
		m.reset()
	}
	r.err = errKind(err)
	return r
}

// run applies o to p.
func run(p *Pool, o op) result {
	var r result
	var err error
	switch o.kind {
	case opAlloc:
		r.off, err = p.AllocateOffset()
	case opAllocAt:
		err = p.AllocateAtOffset(o.off)
	case opRelease:
		err = p.ReleaseOffset(o.off)
	case opAllocAddr:
		err = p.AllocateAddr(p.AddrAt(o.off))
	case opReleaseAddr:
		err = p.Release(p.AddrAt(o.off))
	case opSetCursor:
		err = p.SetCursor(p.AddrAt(o.off))
	case opIsAllocated:
		if p.IsAllocated(p.AddrAt(o.off)) {
			r.off = 1
		}
	case opReset:
		p.Reset()
	}
	r.err = errKind(err)
	return r
}

func (h *harness) invariants(p *Pool) error {
	m := h.m
	if p.Used()+p.Free() != p.Size() {
		return fmt.Errorf("Used %d + Free %d != Size %d", p.Used(), p.Free(), p.Size())
	}
	if p.Used() != uint64(len(m.taken)) || p.Size() != m.size {
		return fmt.Errorf("Used/Size %d/%d, model %d/%d", p.Used(), p.Size(), len(m.taken), m.size)
	}
	if got, want := p.Cursor(), p.AddrAt(m.cursor); got != want {
		return fmt.Errorf("cursor %s, model %s", got, want)
	}
	// The pool handed out what the model did, and the model only takes a
	// free, unreserved window offset, so no address is handed out twice;
	// check the window and the reservations on the pool's side too.
	if c := m.cursor; m.taken[c] && (!p.Contains(p.AddrAt(c)) || m.reserved[c]) {
		return fmt.Errorf("offset %d handed out outside the window or reserved", c)
	}
	return nil
}

// check compares the allocated addresses of every pool with the model:
// Range must give exactly the model's offsets, in ascending order.
func (h *harness) check() error {
	for i, p := range h.pools {
		n, prev, err := 0, uint64(0), error(nil)
		p.Range(func(a netip.Addr) bool {
			off, ok := p.OffsetOf(a)
			switch {
			case !ok || !h.m.taken[off]:
				err = fmt.Errorf("Range gives %s, not allocated in the model", a)
			case n > 0 && off <= prev:
				err = fmt.Errorf("Range gives offset %d after %d", off, prev)
			}
			n, prev = n+1, off
			return err == nil
		})
		if err == nil && n != len(h.m.taken) {
			err = fmt.Errorf("Range gives %d addresses, model %d", n, len(h.m.taken))
		}
		if err != nil {
			return fmt.Errorf("pool %d (%T): %w", i, p.bits, err)
		}
	}
	return nil
}

// TestPoolMatchesModel runs long random operation sequences on the dense
// and the sparse bitmap and on the model, for IPv4 and IPv6 pools.
func TestPoolMatchesModel(t *testing.T) {
	t.Parallel()
	for i, cfg := range []Config{
		{Prefix: netip.MustParsePrefix("1.2.128.8/29"), ReserveLow: 2, ReserveHigh: 2},
		{Prefix: netip.MustParsePrefix("10.1.0.0/24"), ReserveLow: 2, ReserveHigh: 2,
			Reserved: []netip.Addr{netip.MustParseAddr("10.1.0.7"), netip.MustParseAddr("10.1.0.253")}},
		{Prefix: netip.MustParsePrefix("10.2.0.0/19"), ReserveLow: 1, ReserveHigh: 1,
			Reserved: []netip.Addr{netip.MustParseAddr("10.2.16.0"), netip.MustParseAddr("10.2.15.255")}},
		{Prefix: netip.MustParsePrefix("fd00::/116"), ReserveLow: 0, ReserveHigh: 0},
		{Prefix: netip.MustParsePrefix("fd00::/114"), ReserveLow: 4095, ReserveHigh: 4097},
	} {
		t.Run(fmt.Sprintf("%d:%s", i, cfg.Prefix), func(t *testing.T) {
			t.Parallel()
			m, ok := newModel(cfg)
			if !ok {
				t.Fatal("model rejects the config")
			}
			h := &harness{m: m}
			for _, l := range []layout{denseLayout, sparseLayout} {
				p, err := newPool(cfg, l)
				if err != nil {
					t.Fatal(err)
				}
				h.pools = append(h.pools, p)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			weights := []opKind{opAlloc, opAlloc, opAlloc, opRelease, opRelease, opReleaseAddr,
				opAllocAt, opAllocAddr, opSetCursor, opIsAllocated, opFill}
			steps := 20000
			if raceEnabled {
				steps = 2000
			}
			for range steps {
				o := op{kind: weights[rng.IntN(len(weights))]}
				switch {
				case o.kind == opFill:
					o.off = rng.Uint64N(256)
				case rng.IntN(4) == 0:
					o.off = offsetArg(byte(rng.Uint32()), m)
				default:
					o.off = m.lo + rng.Uint64N(m.hi-m.lo+1)
				}
				if rng.IntN(5000) == 0 {
					o.kind = opReset
				}
				if err := h.step(o); err != nil {
					t.Fatal(err)
				}
			}
			if err := h.check(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d steps, %d of %d allocated at the end", h.steps, len(m.taken), m.size)
		})
	}
}
