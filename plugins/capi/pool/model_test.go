package pool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
)

// model is the naive pool: the addresses in a sorted slice, the holdings
// and the grace periods in maps, every choice a linear scan.
type model struct {
	addrs    []netip.Addr
	in       map[netip.Addr]bool
	owners   map[string]netip.Addr
	holders  map[netip.Addr]string
	until    map[netip.Addr]time.Time
	cursor   netip.Addr
	strategy Strategy
	grace    time.Duration
}

func (m *model) expire(now time.Time) {
	for a, at := range m.until {
		if !at.After(now) {
			delete(m.until, a)
		}
	}
}

func (m *model) free(a netip.Addr) bool {
	_, held := m.holders[a]
	_, graced := m.until[a]
	return !held && !graced
}

func (m *model) allocate(owner string, now time.Time) (netip.Addr, bool) {
	if a, ok := m.owners[owner]; ok {
		return a, true
	}
	m.expire(now)
	var pick netip.Addr
	for _, a := range m.addrs {
		if m.free(a) && !pick.IsValid() {
			pick = a // the lowest
		}
		if m.free(a) && m.strategy == NextFit && m.cursor.IsValid() && m.cursor.Less(a) {
			pick = a
			break
		}
	}
	if !pick.IsValid() {
		return pick, false
	}
	m.owners[owner], m.holders[pick], m.cursor = pick, owner, pick
	return pick, true
}

func (m *model) restore(owner string, a netip.Addr) bool {
	if cur, ok := m.owners[owner]; ok {
		return cur == a
	}
	if _, ok := m.holders[a]; ok {
		return false
	}
	delete(m.until, a)
	m.owners[owner], m.holders[a] = a, owner
	return true
}

func (m *model) release(owner string, now time.Time) {
	a, ok := m.owners[owner]
	if !ok {
		return
	}
	delete(m.owners, owner)
	delete(m.holders, a)
	if m.in[a] && m.grace > 0 {
		m.until[a] = now.Add(m.grace)
	}
}

func (m *model) counts(now time.Time) Counts {
	m.expire(now)
	c := Counts{Total: int64(len(m.addrs)), Used: int64(len(m.until))}
	for _, a := range m.owners {
		if m.in[a] {
			c.Used++
		} else {
			c.OutOfRange++
		}
	}
	c.Free = c.Total - c.Used
	return c
}

func (m *model) nextExpiry(now time.Time) (time.Time, bool) {
	m.expire(now)
	var first time.Time
	for _, at := range m.until {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// window is 256 addresses from base; the IPv6 one crosses a /64 boundary
// in its middle.
type window struct {
	base netip.Addr
	bits int
}

func (w window) at(off int) netip.Addr {
	a := w.base
	for range off {
		a = a.Next()
	}
	return a
}

// randomSpec returns a random spec over the window and the addresses it
// hands out, computed by enumeration.
func randomSpec(r *rand.Rand, w window, st Strategy) (v1alpha1.ContivIPPoolSpec, []netip.Addr) {
	s := v1alpha1.ContivIPPoolSpec{AllocationStrategy: string(st), Prefix: int32(w.bits - 8)}
	in, out := map[int]bool{}, map[int]bool{}
	entry := func(set map[int]bool, reserve bool) string {
		switch r.IntN(3) {
		case 0:
			o := r.IntN(256)
			set[o] = true
			return w.at(o).String()
		case 1:
			lo := r.IntN(256)
			hi := min(255, lo+r.IntN(40))
			for o := lo; o <= hi; o++ {
				set[o] = true
			}
			return w.at(lo).String() + "-" + w.at(hi).String()
		}
		k := r.IntN(6)
		lo := r.IntN(256>>k) << k
		for o := lo; o < lo+1<<k; o++ {
			set[o] = true
		}
		if reserve && k > 1 {
			out[lo] = true
			if w.bits == 32 {
				out[lo+1<<k-1] = true
			}
		}
		return netip.PrefixFrom(w.at(lo), w.bits-k).String()
	}
	for range 1 + r.IntN(6) {
		s.Addresses = append(s.Addresses, entry(in, true))
	}
	for range r.IntN(4) {
		s.ExcludedAddresses = append(s.ExcludedAddresses, entry(out, false))
	}
	if r.IntN(2) == 0 {
		o := r.IntN(256)
		out[o] = true
		s.Gateway = w.at(o).String()
	}
	var addrs []netip.Addr
	for o := range 256 {
		if in[o] && !out[o] {
			addrs = append(addrs, w.at(o))
		}
	}
	return s, addrs
}

func TestModel(t *testing.T) {
	windows := []struct {
		name string
		w    window
	}{
		{"v4", window{addr("10.0.0.0"), 32}},
		{"v6", window{addr("2001:db8:0:0:ffff:ffff:ffff:ff80"), 128}},
	}
	for _, win := range windows {
		for _, st := range []Strategy{LowestFree, NextFit} {
			t.Run(win.name+"/"+string(st), func(t *testing.T) {
				for seed := range uint64(20) {
					runModel(t, win.w, st, seed)
				}
			})
		}
	}
}

func runModel(t *testing.T, w window, st Strategy, seed uint64) {
	g := NewWithT(t)
	r := rand.New(rand.NewPCG(seed, 7))
	s, addrs := randomSpec(r, w, st)
	grace := time.Duration(r.IntN(3)) * time.Second
	s = graced(s, grace)
	ps, err := ParseSpec(s)
	if len(addrs) == 0 {
		g.Expect(err).To(MatchError(ErrInvalidSpec), "seed %d: %+v", seed, s)
		return
	}
	g.Expect(err).NotTo(HaveOccurred(), "seed %d", seed)
	p, err := New(ps)
	g.Expect(err).NotTo(HaveOccurred())
	m := &model{addrs: addrs, in: map[netip.Addr]bool{}, owners: map[string]netip.Addr{}, holders: map[netip.Addr]string{},
		until: map[netip.Addr]time.Time{}, strategy: st, grace: grace}
	for _, a := range addrs {
		m.in[a] = true
	}
	now := t0
	for step := range 3000 {
		where := fmt.Sprintf("seed %d step %d spec %+v", seed, step, s)
		owner := fmt.Sprint("o", r.IntN(len(addrs)+4))
		switch op := r.IntN(10); {
		case op < 4:
			want, ok := m.allocate(owner, now)
			got, err := p.Allocate(owner, now)
			if !ok {
				g.Expect(err).To(MatchError(ErrExhausted), where)
				break
			}
			g.Expect(err).NotTo(HaveOccurred(), where)
			g.Expect(got).To(Equal(want), where)
		case op < 7:
			m.release(owner, now)
			p.Release(owner, now)
		case op < 8:
			a := w.at(r.IntN(256)).Prev() // now and then below the window
			ok := m.restore(owner, a)
			err := p.Restore(owner, a)
			if ok {
				g.Expect(err).NotTo(HaveOccurred(), where)
			} else {
				g.Expect(errors.Is(err, ErrTaken)).To(BeTrue(), where)
			}
		default:
			now = now.Add(time.Duration(r.IntN(1500)) * time.Millisecond)
		}
		g.Expect(p.Counts(now)).To(Equal(m.counts(now)), where)
		wantAt, wantOK := m.nextExpiry(now)
		gotAt, gotOK := p.NextExpiry(now)
		g.Expect(gotOK).To(Equal(wantOK), where)
		g.Expect(gotAt).To(Equal(wantAt), where)
		got, ok := p.Lookup(owner)
		want, wantOK2 := m.owners[owner]
		g.Expect(ok).To(Equal(wantOK2))
		g.Expect(got).To(Equal(want))
	}
	g.Expect(slices.IsSortedFunc(addrs, netip.Addr.Compare)).To(BeTrue())
}
