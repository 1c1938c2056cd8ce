package pool

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/contiv-ipam/agent/engine/ipalloc"
)

// Sentinel errors, always wrapped with the addresses and owners involved;
// branch with errors.Is.
var (
	// ErrExhausted means that no address of the pool is free (addresses in
	// their reuse grace period are not free; NextExpiry says when the
	// first of them will be).
	ErrExhausted = errors.New("pool exhausted")
	// ErrTaken means that Restore found the address held by another owner,
	// or the owner holding another address.
	ErrTaken = errors.New("address taken")
)

// Counts are the numbers of v1alpha1.PoolAddresses.
type Counts struct {
	Total, Used, Free, OutOfRange int64
}

// Pool hands out the addresses of one Spec to owners, one address per
// owner and one owner per address. It is not safe for concurrent use, not
// even its queries: its single owner serialises every call.
type Pool struct {
	spec     *Spec
	strategy Strategy
	grace    time.Duration
	parts    []part
	total    int64

	owners  map[string]netip.Addr // owner -> address, in range or not
	holders map[netip.Addr]string // address -> owner
	outside int                   // owners whose address is in no part
	expiry  expiries              // released addresses in their grace period
	cursor  netip.Addr            // the last address handed out; zero: none
}

// part is a run of addresses inside one IPv6 /64 (or IPv4), served by one
// ipalloc.Pool whose window is exactly [first, last].
type part struct {
	first, last netip.Addr
	alloc       *ipalloc.Pool
}

// New returns an empty pool for spec, which must come from ParseSpec.
func New(spec *Spec) (*Pool, error) {
	if spec == nil || len(spec.ranges) == 0 {
		return nil, fmt.Errorf("new pool: %w: no address (use ParseSpec)", ErrInvalidSpec)
	}
	p := &Pool{
		spec:     spec,
		strategy: spec.Strategy,
		grace:    spec.Grace,
		owners:   make(map[string]netip.Addr),
		holders:  make(map[netip.Addr]string),
		expiry:   newExpiries(),
	}
	for _, r := range spec.ranges {
		for _, c := range cut64(r) {
			pt, err := newPart(c)
			if err != nil {
				return nil, fmt.Errorf("new pool: part %s: %w", c, err)
			}
			p.parts = append(p.parts, pt)
			p.total = satAdd(p.total, pt.alloc.Size())
		}
	}
	return p, nil
}

// newPart returns the part of r: the smallest prefix covering r, with
// everything below and above r reserved.
func newPart(r Range) (part, error) {
	cover := covering(r)
	top := lastOf(cover)
	cfg := ipalloc.Config{Prefix: cover, ReserveLow: distance(cover.Addr(), r.First), ReserveHigh: distance(r.Last, top)}
	a, err := ipalloc.New(cfg)
	if err != nil {
		return part{}, err
	}
	return part{first: r.First, last: r.Last, alloc: a}, nil
}

// Rebuild returns a pool for spec that keeps the holdings of p: every
// owner keeps its address (those in no part of spec count as out of
// range), the addresses in their grace period that spec still hands out
// stay in it, and NextFit goes on after the same address. It also returns
// the owners whose address spec does not hand out, sorted. p is left as it
// was.
func (p *Pool) Rebuild(spec *Spec) (*Pool, []string, error) {
	q, err := New(spec)
	if err != nil {
		return nil, nil, err
	}
	q.cursor = p.cursor
	owners := make([]string, 0, len(p.owners))
	for o := range p.owners {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	var outside []string
	for _, o := range owners {
		a := p.owners[o]
		// It cannot fail: p holds each address once, each owner once.
		if err := q.Restore(o, a); err != nil {
			return nil, nil, fmt.Errorf("rebuild: %w", err)
		}
		if q.partOf(a) == nil {
			outside = append(outside, o)
		}
	}
	for a, at := range p.expiry.until {
		if pt := q.partOf(a); pt != nil && pt.alloc.AllocateAddr(a) == nil {
			q.expiry.add(a, at)
		}
	}
	return q, outside, nil
}

// Spec returns the spec the pool was built from.
func (p *Pool) Spec() *Spec { return p.spec }

// Allocate returns the address of owner: the one it holds (in range or
// not), or a free one picked by the strategy, which it then holds. The
// error wraps ErrExhausted when no address is free at now.
func (p *Pool) Allocate(owner string, now time.Time) (netip.Addr, error) {
	if owner == "" {
		return netip.Addr{}, errors.New("allocate: empty owner")
	}
	if a, ok := p.owners[owner]; ok {
		return a, nil
	}
	p.expire(now)
	var a netip.Addr
	var ok bool
	if p.strategy == NextFit && p.cursor.IsValid() {
		a, ok = p.nextFit()
	} else {
		a, ok = p.lowestFrom(0)
	}
	if !ok {
		return netip.Addr{}, fmt.Errorf("allocate for %q: all %d addresses are used or in their grace period: %w", owner, p.total, ErrExhausted)
	}
	p.hold(owner, a)
	p.cursor = a
	return a, nil
}

// lowestFrom returns the lowest free address of the parts from index i on,
// now taken.
func (p *Pool) lowestFrom(i int) (netip.Addr, bool) {
	for ; i < len(p.parts); i++ {
		if a, ok := p.parts[i].lowest(); ok {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// nextFit returns the first free address after the cursor, wrapping around
// at the top of the pool, now taken.
func (p *Pool) nextFit() (netip.Addr, bool) {
	k, _ := slices.BinarySearchFunc(p.parts, p.cursor, func(pt part, a netip.Addr) int {
		return pt.last.Compare(a)
	})
	if k < len(p.parts) && p.parts[k].first.Compare(p.cursor) <= 0 {
		if a, ok := p.parts[k].after(p.cursor); ok {
			return a, true
		}
		k++
	}
	if a, ok := p.lowestFrom(k); ok {
		return a, true
	}
	for i := 0; i < k; i++ {
		if a, ok := p.parts[i].lowest(); ok {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// lowest takes the lowest free address of the part.
func (pt *part) lowest() (netip.Addr, bool) {
	if pt.alloc.Free() == 0 {
		return netip.Addr{}, false
	}
	// A cursor at the top of the window makes the search start at its
	// bottom.
	if err := pt.alloc.SetCursor(pt.last); err != nil {
		return netip.Addr{}, false
	}
	a, err := pt.alloc.Allocate()
	return a, err == nil
}

// after takes the first free address of the part above c, without
// wrapping.
func (pt *part) after(c netip.Addr) (netip.Addr, bool) {
	if pt.alloc.Free() == 0 || pt.alloc.SetCursor(c) != nil {
		return netip.Addr{}, false
	}
	a, err := pt.alloc.Allocate()
	if err != nil {
		return netip.Addr{}, false
	}
	if c.Less(a) {
		return a, true
	}
	// It wrapped: give it back, the caller comes round to it last.
	_ = pt.alloc.Release(a)
	return netip.Addr{}, false
}

// Restore makes owner hold a, an address an existing IPAddress has: on
// start, before the first Allocate. An address the pool does not hand out
// is held all the same and counted out of range. Restoring what the owner
// already holds is a no-op; an address in its grace period leaves it. The
// error wraps ErrTaken when another owner holds a or owner holds another
// address; nothing changes then.
func (p *Pool) Restore(owner string, a netip.Addr) error {
	if owner == "" || !a.IsValid() {
		return fmt.Errorf("restore %q for owner %q: an owner and an address are required", a, owner)
	}
	if cur, ok := p.owners[owner]; ok {
		if cur == a {
			return nil
		}
		return fmt.Errorf("restore %s for %q: %q already holds %s: %w", a, owner, owner, cur, ErrTaken)
	}
	if other, ok := p.holders[a]; ok {
		return fmt.Errorf("restore %s for %q: held by %q: %w", a, owner, other, ErrTaken)
	}
	if pt := p.partOf(a); pt != nil && !p.expiry.remove(a) {
		if err := pt.alloc.AllocateAddr(a); err != nil {
			return fmt.Errorf("restore %s for %q: %w", a, owner, err)
		}
	}
	p.hold(owner, a)
	return nil
}

// Release lets go of the address of owner: it is used until now plus the
// grace period and free from then on (at once without a grace period). An
// owner that holds nothing is fine; an address out of range is forgotten.
func (p *Pool) Release(owner string, now time.Time) {
	a, ok := p.owners[owner]
	if !ok {
		return
	}
	delete(p.owners, owner)
	delete(p.holders, a)
	pt := p.partOf(a)
	switch {
	case pt == nil:
		p.outside--
	case p.grace > 0:
		p.expiry.add(a, now.Add(p.grace))
	default:
		_ = pt.alloc.Release(a)
	}
}

// Lookup returns the address owner holds.
func (p *Pool) Lookup(owner string) (netip.Addr, bool) {
	a, ok := p.owners[owner]
	return a, ok
}

// Owner returns the owner holding a.
func (p *Pool) Owner(a netip.Addr) (string, bool) {
	o, ok := p.holders[a]
	return o, ok
}

// Counts returns the counts at now (addresses whose grace period is over
// are freed first). Total saturates at math.MaxInt64.
func (p *Pool) Counts(now time.Time) Counts {
	p.expire(now)
	var used int64
	for i := range p.parts {
		used = satAdd(used, p.parts[i].alloc.Used())
	}
	return Counts{Total: p.total, Used: used, Free: p.total - min(used, p.total), OutOfRange: int64(p.outside)}
}

// NextExpiry returns when the next address in its grace period becomes
// free: the earliest such time after now; false when none is in it.
func (p *Pool) NextExpiry(now time.Time) (time.Time, bool) {
	p.expire(now)
	return p.expiry.next()
}

// Cursor returns the last address handed out (the zero Addr when none),
// after which NextFit goes on.
func (p *Pool) Cursor() netip.Addr { return p.cursor }

// SetCursor makes NextFit go on after a (any address: the search starts
// at the first address of the pool above it); the zero Addr starts at the
// bottom. A provider that knows the last address handed out before a
// restart sets it after Restore.
func (p *Pool) SetCursor(a netip.Addr) { p.cursor = a }

// hold records owner -> a.
func (p *Pool) hold(owner string, a netip.Addr) {
	p.owners[owner] = a
	p.holders[a] = owner
	if p.partOf(a) == nil {
		p.outside++
	}
}

// expire frees the addresses whose grace period is over at now.
func (p *Pool) expire(now time.Time) {
	p.expiry.popUntil(now, func(a netip.Addr) {
		if pt := p.partOf(a); pt != nil {
			_ = pt.alloc.Release(a)
		}
	})
}

// partOf returns the part holding a; nil when a is in none (another
// family, a zone, or not handed out).
func (p *Pool) partOf(a netip.Addr) *part {
	if a.Zone() != "" {
		return nil
	}
	i, _ := slices.BinarySearchFunc(p.parts, a, func(pt part, a netip.Addr) int {
		return pt.last.Compare(a)
	})
	if i == len(p.parts) || a.Less(p.parts[i].first) {
		return nil
	}
	return &p.parts[i]
}

// cut64 cuts r at IPv6 /64 boundaries, so that every piece has offsets
// below 2^64 in its covering prefix.
func cut64(r Range) []Range {
	if r.First.Is4() {
		return []Range{r}
	}
	var out []Range
	for {
		end := lastOf(netip.PrefixFrom(r.First, 64))
		if !end.Less(r.Last) {
			return append(out, r)
		}
		out = append(out, Range{r.First, end})
		r.First = end.Next()
	}
}

// covering returns the smallest prefix holding r.
func covering(r Range) netip.Prefix {
	for bits := r.First.BitLen(); ; bits-- {
		p, _ := r.First.Prefix(bits)
		if p.Contains(r.Last) {
			return p
		}
	}
}

// distance returns b-a for a <= b less than 2^64 apart.
func distance(a, b netip.Addr) uint64 {
	x, y := a.As16(), b.As16()
	return be64(y[8:]) - be64(x[8:])
}

// satAdd returns a+b, saturating at math.MaxInt64.
func satAdd(a int64, b uint64) int64 {
	if b > uint64(math.MaxInt64-a) {
		return math.MaxInt64
	}
	return a + int64(b)
}
