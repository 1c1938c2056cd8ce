package ipalloc

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

type podKey struct{ Namespace, Name string }

func mustKeyed(t *testing.T, cfg Config) *Keyed[podKey] {
	t.Helper()
	k, err := NewKeyed[podKey](cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyedAssign(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, prefix string
		want         []string // pod1, pod2, (unassign pod2) pod3, pod4, pod2 again
	}{
		{name: "v4", prefix: "1.2.128.8/29", want: []string{"1.2.128.10", "1.2.128.11", "1.2.128.12", "1.2.128.13", "1.2.128.11"}},
		{name: "v6", prefix: "fd00::8/125", want: []string{"fd00::a", "fd00::b", "fd00::c", "fd00::d", "fd00::b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			k := mustKeyed(t, Config{Prefix: prefix(tc.prefix), ReserveLow: 2, ReserveHigh: 2})
			assign := func(name string, existed bool) netip.Addr {
				a, ex, err := k.Assign(podKey{"default", name})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ex).To(Equal(existed))
				return a
			}
			g.Expect(assign("pod1", false)).To(Equal(addr(tc.want[0])))
			g.Expect(assign("pod1", true)).To(Equal(addr(tc.want[0])), "idempotent")
			g.Expect(assign("pod2", false)).To(Equal(addr(tc.want[1])))
			a, ok := k.Unassign(podKey{"default", "pod2"})
			g.Expect(ok).To(BeTrue())
			g.Expect(a).To(Equal(addr(tc.want[1])))
			_, ok = k.Unassign(podKey{"default", "pod2"})
			g.Expect(ok).To(BeFalse(), "a second unassign")
			g.Expect(assign("pod3", false)).To(Equal(addr(tc.want[2])))
			g.Expect(assign("pod4", false)).To(Equal(addr(tc.want[3])))
			g.Expect(assign("pod2", false)).To(Equal(addr(tc.want[4])))
			_, _, err := k.Assign(podKey{"default", "pod5"})
			g.Expect(err).To(MatchError(ErrPoolExhausted))
			g.Expect(k.Len()).To(Equal(4))
			g.Expect(k.Pool().Used()).To(Equal(uint64(4)))

			got, ok := k.Lookup(podKey{"default", "pod3"})
			g.Expect(ok).To(BeTrue())
			g.Expect(got).To(Equal(addr(tc.want[2])))
			owner, ok := k.Owner(addr(tc.want[3]))
			g.Expect(ok).To(BeTrue())
			g.Expect(owner).To(Equal(podKey{"default", "pod4"}))
			_, ok = k.Lookup(podKey{"default", "pod5"})
			g.Expect(ok).To(BeFalse())
			_, ok = k.Owner(addr(tc.want[0]).Prev())
			g.Expect(ok).To(BeFalse())
		})
	}
}

func TestKeyedAssignAddr(t *testing.T) {
	t.Parallel()
	pod1, pod2 := podKey{"ns", "pod1"}, podKey{"ns", "pod2"}
	for _, tc := range []struct {
		name   string
		prefix string
		held   string // pod1 holds it before the case
		key    podKey
		addr   string
		want   error    // nil: succeeds
		msg    []string // in the error message
	}{
		{name: "v4 restore", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod2, addr: "10.0.0.6"},
		{name: "v6 restore", prefix: "fd00::/64", held: "fd00::5", key: pod2, addr: "fd00::6"},
		{name: "v4 same again", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod1, addr: "10.0.0.5"},
		{name: "v6 same again", prefix: "fd00::/64", held: "fd00::5", key: pod1, addr: "fd00::5"},
		{name: "v4 mapped same again", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod1, addr: "::ffff:10.0.0.5"},
		{name: "v4 held by another key", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod2, addr: "10.0.0.5",
			want: ErrTaken, msg: []string{"10.0.0.5", "pod1", "pod2"}},
		{name: "v6 held by another key", prefix: "fd00::/64", held: "fd00::5", key: pod2, addr: "fd00::5",
			want: ErrTaken, msg: []string{"fd00::5", "pod1", "pod2"}},
		{name: "v4 key holds another", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod1, addr: "10.0.0.6",
			want: ErrTaken, msg: []string{"10.0.0.5", "10.0.0.6", "pod1"}},
		{name: "v6 key holds another", prefix: "fd00::/64", held: "fd00::5", key: pod1, addr: "fd00::6",
			want: ErrTaken, msg: []string{"fd00::5", "fd00::6", "pod1"}},
		{name: "v4 key holds another, out of range", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod1, addr: "10.9.0.6", want: ErrTaken},
		{name: "v4 out of range", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod2, addr: "10.0.0.255", want: ErrOutOfRange},
		{name: "v6 out of range", prefix: "fd00::/64", held: "fd00::5", key: pod2, addr: "fd01::5", want: ErrOutOfRange},
		{name: "v4 reserved", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod2, addr: "10.0.0.9", want: ErrReserved},
		{name: "v4 allocated without owner", prefix: "10.0.0.0/24", held: "10.0.0.5", key: pod2, addr: "10.0.0.7", want: ErrTaken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p := prefix(tc.prefix)
			k := mustKeyed(t, Config{Prefix: p, ReserveLow: 2, ReserveHigh: 2,
				Reserved: []netip.Addr{refAddr(p, 9)}})
			g.Expect(k.AssignAddr(pod1, addr(tc.held))).To(Succeed())
			g.Expect(k.Pool().AllocateAddr(refAddr(p, 7))).To(Succeed()) // no owner
			err := k.AssignAddr(tc.key, addr(tc.addr))
			if tc.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
				got, ok := k.Lookup(tc.key)
				g.Expect(ok).To(BeTrue())
				g.Expect(got).To(Equal(addr(tc.addr).Unmap()))
				owner, ok := k.Owner(addr(tc.addr))
				g.Expect(ok).To(BeTrue())
				g.Expect(owner).To(Equal(tc.key))
				g.Expect(k.Pool().Cursor()).To(Equal(p.Addr().Next()), "AssignAddr does not move the cursor")
				return
			}
			g.Expect(err).To(MatchError(tc.want))
			for _, m := range tc.msg {
				g.Expect(err.Error()).To(ContainSubstring(m))
			}
			got, ok := k.Lookup(pod1)
			g.Expect(ok).To(BeTrue())
			g.Expect(got).To(Equal(addr(tc.held)), "pod1 keeps its address")
			_, ok = k.Lookup(pod2)
			g.Expect(ok).To(BeFalse())
			g.Expect(k.Len()).To(Equal(1))
			g.Expect(k.Pool().Used()).To(Equal(uint64(2)))
		})
	}
}

func TestKeyedRangeAndReset(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k := mustKeyed(t, Config{Prefix: prefix("10.0.0.0/16"), ReserveLow: 2, ReserveHigh: 2})
	want := []struct {
		key  podKey
		addr string
	}{{podKey{"a", "x"}, "10.0.0.9"}, {podKey{"b", "y"}, "10.0.16.1"}, {podKey{"c", "z"}, "10.0.200.3"}}
	for _, i := range []int{2, 0, 1} {
		g.Expect(k.AssignAddr(want[i].key, addr(want[i].addr))).To(Succeed())
	}
	g.Expect(k.Pool().AllocateAddr(addr("10.0.0.10"))).To(Succeed()) // no owner: not in Range
	var keys []podKey
	var addrs []string
	k.Range(func(key podKey, a netip.Addr) bool {
		keys, addrs = append(keys, key), append(addrs, a.String())
		return true
	})
	g.Expect(keys).To(Equal([]podKey{want[0].key, want[1].key, want[2].key}))
	g.Expect(addrs).To(Equal([]string{want[0].addr, want[1].addr, want[2].addr}))
	n := 0
	k.Range(func(podKey, netip.Addr) bool { n++; return false })
	g.Expect(n).To(Equal(1))

	k.Reset()
	g.Expect(k.Len()).To(BeZero())
	g.Expect(k.Pool().Used()).To(BeZero())
	_, ok := k.Lookup(want[0].key)
	g.Expect(ok).To(BeFalse())
	a, existed, err := k.Assign(want[0].key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(existed).To(BeFalse())
	g.Expect(a).To(Equal(addr("10.0.0.2")))
}

func TestKeyedZero(t *testing.T) {
	t.Parallel()
	for name, k := range map[string]*Keyed[string]{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := k.Assign("a")
			g.Expect(err).To(MatchError(ErrPoolExhausted))
			g.Expect(k.AssignAddr("a", addr("10.0.0.1"))).To(MatchError(ErrOutOfRange))
			_, ok := k.Unassign("a")
			g.Expect(ok).To(BeFalse())
			_, ok = k.Lookup("a")
			g.Expect(ok).To(BeFalse())
			_, ok = k.Owner(addr("10.0.0.1"))
			g.Expect(ok).To(BeFalse())
			g.Expect(k.Len()).To(BeZero())
			g.Expect(k.Pool().Size()).To(BeZero())
			k.Range(func(string, netip.Addr) bool { t.Fatal("Range on an empty pool"); return false })
			k.Reset()
		})
	}
}

func TestNewKeyedError(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k, err := NewKeyed[string](Config{Prefix: prefix("10.0.0.1/32"), ReserveLow: 2})
	g.Expect(err).To(HaveOccurred())
	g.Expect(k).To(BeNil())
}
