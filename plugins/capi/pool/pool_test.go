package pool

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contiv-ipam/agent/plugins/capi/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustPool(t testing.TB, s v1alpha1.ContivIPPoolSpec) *Pool {
	t.Helper()
	ps, err := ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(ps)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func strategy(s v1alpha1.ContivIPPoolSpec, st Strategy) v1alpha1.ContivIPPoolSpec {
	s.AllocationStrategy = string(st)
	return s
}

func graced(s v1alpha1.ContivIPPoolSpec, d time.Duration) v1alpha1.ContivIPPoolSpec {
	s.AddressReuseGracePeriod = &metav1.Duration{Duration: d}
	return s
}

// allocateAll allocates for owner0, owner1, ... until the pool is
// exhausted and returns the addresses as strings.
func allocateAll(t *testing.T, p *Pool, now time.Time) []string {
	t.Helper()
	var out []string
	for i := 0; ; i++ {
		a, err := p.Allocate(fmt.Sprintf("owner%d", i), now)
		if errors.Is(err, ErrExhausted) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a.String())
	}
}

// nonContiguous4 and nonContiguous6 are the same pool in both families:
// a CIDR, a range and single IPs, out of order, with a gateway and
// exclusions.
var (
	nonContiguous4 = v1alpha1.ContivIPPoolSpec{
		Addresses:         []string{"10.0.1.5", "10.0.0.8/30", "10.0.0.20-10.0.0.23", "10.0.0.2"},
		Prefix:            24,
		Gateway:           "10.0.0.21",
		ExcludedAddresses: []string{"10.0.0.22"},
	}
	nonContiguous6 = v1alpha1.ContivIPPoolSpec{
		Addresses:         []string{"2001:db8:0:1::5", "2001:db8::8/126", "2001:db8::20-2001:db8::23", "2001:db8::2"},
		Prefix:            64,
		Gateway:           "2001:db8::21",
		ExcludedAddresses: []string{"2001:db8::22"},
	}
)

func TestAllocateSequence(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.ContivIPPoolSpec
		want []string
	}{
		// 10.0.0.8/30 hands out .9 and .10 only (network and broadcast).
		{"v4", nonContiguous4, []string{"10.0.0.2", "10.0.0.9", "10.0.0.10", "10.0.0.20", "10.0.0.23", "10.0.1.5"}},
		// 2001:db8::8/126 hands out ::9, ::a and ::b (not the anycast ::8).
		{"v6", nonContiguous6, []string{"2001:db8::2", "2001:db8::9", "2001:db8::a", "2001:db8::b", "2001:db8::20", "2001:db8::23", "2001:db8:0:1::5"}},
	}
	for _, tt := range tests {
		for _, st := range []Strategy{LowestFree, NextFit} {
			t.Run(tt.name+"/"+string(st), func(t *testing.T) {
				g := NewWithT(t)
				p := mustPool(t, strategy(tt.spec, st))
				g.Expect(allocateAll(t, p, t0)).To(Equal(tt.want))
				c := p.Counts(t0)
				g.Expect(c).To(Equal(Counts{Total: int64(len(tt.want)), Used: int64(len(tt.want))}))
				_, err := p.Allocate("late", t0)
				g.Expect(err).To(MatchError(ErrExhausted))
				g.Expect(err).To(MatchError(ContainSubstring(`allocate for "late"`)))
			})
		}
	}
}

// TestStrategies releases two addresses of a full pool, the higher one
// first, and allocates again: LowestFree gives the lowest one, NextFit
// the first above the last handed out, then wraps.
func TestStrategies(t *testing.T) {
	tests := []struct {
		name     string
		spec     v1alpha1.ContivIPPoolSpec
		strategy Strategy
		release  []string // owners
		cursor   string   // "" keeps the cursor
		want     []string
	}{
		{"v4 LowestFree", nonContiguous4, LowestFree, []string{"owner3", "owner1"}, "", []string{"10.0.0.9", "10.0.0.20"}},
		{"v6 LowestFree", nonContiguous6, LowestFree, []string{"owner4", "owner1"}, "", []string{"2001:db8::9", "2001:db8::20"}},
		{"v4 NextFit wraps", nonContiguous4, NextFit, []string{"owner3", "owner1"}, "", []string{"10.0.0.9", "10.0.0.20"}},
		{"v6 NextFit wraps", nonContiguous6, NextFit, []string{"owner4", "owner1"}, "", []string{"2001:db8::9", "2001:db8::20"}},
		{"v4 NextFit from the middle", nonContiguous4, NextFit, []string{"owner3", "owner1"}, "10.0.0.10", []string{"10.0.0.20", "10.0.0.9"}},
		{"v6 NextFit from the middle", nonContiguous6, NextFit, []string{"owner4", "owner1"}, "2001:db8::a", []string{"2001:db8::20", "2001:db8::9"}},
		{"v4 NextFit from a gap", nonContiguous4, NextFit, []string{"owner3", "owner1"}, "10.0.0.15", []string{"10.0.0.20", "10.0.0.9"}},
		{"v6 NextFit from a gap", nonContiguous6, NextFit, []string{"owner4", "owner1"}, "2001:db8::15", []string{"2001:db8::20", "2001:db8::9"}},
		{"v4 NextFit from below", nonContiguous4, NextFit, []string{"owner3", "owner1"}, "9.0.0.0", []string{"10.0.0.9", "10.0.0.20"}},
		{"v6 NextFit from the other family", nonContiguous6, NextFit, []string{"owner4", "owner1"}, "10.0.0.1", []string{"2001:db8::9", "2001:db8::20"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := mustPool(t, strategy(tt.spec, tt.strategy))
			allocateAll(t, p, t0)
			for _, o := range tt.release {
				p.Release(o, t0)
			}
			if tt.cursor != "" {
				p.SetCursor(addr(tt.cursor))
			}
			var got []string
			for i := range tt.want {
				a, err := p.Allocate(fmt.Sprintf("new%d", i), t0)
				g.Expect(err).NotTo(HaveOccurred())
				got = append(got, a.String())
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestNextFitRoundTrip: a released address is handed out again only after
// the cursor went round the pool.
func TestNextFitRoundTrip(t *testing.T) {
	for _, s := range []v1alpha1.ContivIPPoolSpec{spec("10.0.0.1-10.0.0.4", "10.0.0.10-10.0.0.11"), spec("2001:db8::1-2001:db8::4", "2001:db8:1::10-2001:db8:1::11")} {
		t.Run(s.Addresses[0], func(t *testing.T) {
			g := NewWithT(t)
			p := mustPool(t, strategy(s, NextFit))
			var got []string
			for i := range 12 {
				o := fmt.Sprint("o", i)
				a, err := p.Allocate(o, t0)
				g.Expect(err).NotTo(HaveOccurred())
				got = append(got, a.String())
				p.Release(o, t0)
			}
			g.Expect(got[:6]).To(Equal(got[6:]))
			g.Expect(got[0]).To(Equal(s.Addresses[0][:len(got[0])]))
		})
	}
}

func TestAllocateIdempotent(t *testing.T) {
	for _, s := range []v1alpha1.ContivIPPoolSpec{nonContiguous4, nonContiguous6} {
		t.Run(s.Addresses[0], func(t *testing.T) {
			g := NewWithT(t)
			p := mustPool(t, s)
			a, err := p.Allocate("m1", t0)
			g.Expect(err).NotTo(HaveOccurred())
			b, err := p.Allocate("m1", t0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b).To(Equal(a))
			g.Expect(p.Counts(t0).Used).To(Equal(int64(1)))
			got, ok := p.Lookup("m1")
			g.Expect(ok).To(BeTrue())
			g.Expect(got).To(Equal(a))
			o, ok := p.Owner(a)
			g.Expect(ok).To(BeTrue())
			g.Expect(o).To(Equal("m1"))
			_, err = p.Allocate("", t0)
			g.Expect(err).To(HaveOccurred())
		})
	}
}

func TestGracePeriod(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.ContivIPPoolSpec
	}{
		{"v4", spec("10.0.0.1-10.0.0.2")},
		{"v6", spec("2001:db8::1-2001:db8::2")},
	}
	for _, tt := range tests {
		for _, st := range []Strategy{LowestFree, NextFit} {
			t.Run(tt.name+"/"+string(st), func(t *testing.T) {
				g := NewWithT(t)
				p := mustPool(t, strategy(graced(tt.spec, time.Minute), st))
				a1, _ := p.Allocate("a", t0)
				a2, _ := p.Allocate("b", t0)
				_, ok := p.NextExpiry(t0)
				g.Expect(ok).To(BeFalse())

				p.Release("a", t0.Add(time.Second))
				p.Release("nobody", t0) // nothing held: fine
				g.Expect(p.Counts(t0.Add(time.Second))).To(Equal(Counts{Total: 2, Used: 2}))
				at, ok := p.NextExpiry(t0.Add(time.Second))
				g.Expect(ok).To(BeTrue())
				g.Expect(at).To(Equal(t0.Add(time.Minute + time.Second)))

				_, err := p.Allocate("c", at.Add(-time.Nanosecond))
				g.Expect(err).To(MatchError(ErrExhausted))
				c, err := p.Allocate("c", at)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c).To(Equal(a1))
				_, ok = p.NextExpiry(at)
				g.Expect(ok).To(BeFalse())

				// Released with no grace period left pending; Counts frees it.
				p.Release("b", at)
				g.Expect(p.Counts(at.Add(time.Minute - 1)).Used).To(Equal(int64(2)))
				g.Expect(p.Counts(at.Add(time.Minute)).Used).To(Equal(int64(1)))
				d, err := p.Allocate("d", at.Add(time.Minute))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d).To(Equal(a2))
			})
		}
	}
}

// TestGraceRestored: an IPAddress found for an address in its grace period
// takes it out of it.
func TestGraceRestored(t *testing.T) {
	for _, s := range []v1alpha1.ContivIPPoolSpec{spec("10.0.0.1"), spec("2001:db8::1")} {
		t.Run(s.Addresses[0], func(t *testing.T) {
			g := NewWithT(t)
			p := mustPool(t, graced(s, time.Minute))
			a, _ := p.Allocate("a", t0)
			p.Release("a", t0)
			g.Expect(p.Restore("b", a)).To(Succeed())
			_, ok := p.NextExpiry(t0)
			g.Expect(ok).To(BeFalse())
			// The stale heap entry frees nothing at its time.
			g.Expect(p.Counts(t0.Add(time.Hour))).To(Equal(Counts{Total: 1, Used: 1}))
			p.Release("b", t0.Add(time.Hour))
			at, _ := p.NextExpiry(t0.Add(time.Hour))
			g.Expect(at).To(Equal(t0.Add(time.Hour + time.Minute)))
		})
	}
}

func TestRestore(t *testing.T) {
	tests := []struct {
		name    string
		spec    v1alpha1.ContivIPPoolSpec
		inside  string
		gateway string
		outside string
		other   string // another family
	}{
		{"v4", nonContiguous4, "10.0.0.20", "10.0.0.21", "10.0.0.99", "2001:db8::2"},
		{"v6", nonContiguous6, "2001:db8::20", "2001:db8::21", "2001:db8::99", "10.0.0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := mustPool(t, tt.spec)
			g.Expect(p.Restore("in", addr(tt.inside))).To(Succeed())
			g.Expect(p.Restore("in", addr(tt.inside))).To(Succeed()) // no-op
			g.Expect(p.Restore("gw", addr(tt.gateway))).To(Succeed())
			g.Expect(p.Restore("out", addr(tt.outside))).To(Succeed())
			g.Expect(p.Restore("fam", addr(tt.other))).To(Succeed())
			c := p.Counts(t0)
			g.Expect(c.Used).To(Equal(int64(1)))
			g.Expect(c.OutOfRange).To(Equal(int64(3)))
			g.Expect(c.Free).To(Equal(c.Total - 1))

			err := p.Restore("dup", addr(tt.inside))
			g.Expect(err).To(MatchError(ErrTaken))
			g.Expect(err.Error()).To(And(ContainSubstring(`"dup"`), ContainSubstring(`held by "in"`), ContainSubstring(tt.inside)))
			err = p.Restore("dup", addr(tt.outside))
			g.Expect(err).To(MatchError(ContainSubstring(`held by "out"`)))
			err = p.Restore("in", addr(tt.outside))
			g.Expect(err).To(MatchError(ErrTaken))
			g.Expect(err.Error()).To(ContainSubstring(`"in" already holds ` + tt.inside))
			g.Expect(p.Restore("", addr(tt.inside))).NotTo(Succeed())
			g.Expect(p.Restore("x", netip.Addr{})).NotTo(Succeed())

			// The owner out of range keeps its address.
			a, err := p.Allocate("out", t0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(addr(tt.outside)))
			// Allocation never hands out the restored addresses.
			for _, a := range allocateAll(t, p, t0) {
				g.Expect(a).NotTo(BeElementOf(tt.inside, tt.gateway, tt.outside))
			}
			p.Release("out", t0)
			p.Release("gw", t0)
			g.Expect(p.Counts(t0).OutOfRange).To(Equal(int64(1)))
		})
	}
}

func TestRebuild(t *testing.T) {
	tests := []struct {
		name        string
		from, to    v1alpha1.ContivIPPoolSpec
		keep, leave string // an address in both specs, one in the first only
		join        string // an address out of range in the first, in the second
		graceKept   string // in grace, in both
	}{
		{"v4", spec("10.0.0.1-10.0.0.10"), spec("10.0.0.3-10.0.0.20"), "10.0.0.5", "10.0.0.1", "10.0.0.15", "10.0.0.6"},
		{"v6", spec("2001:db8::1-2001:db8::a"), spec("2001:db8::3-2001:db8::14"), "2001:db8::5", "2001:db8::1", "2001:db8::f", "2001:db8::6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := mustPool(t, graced(strategy(tt.from, NextFit), time.Minute))
			g.Expect(p.Restore("keep", addr(tt.keep))).To(Succeed())
			g.Expect(p.Restore("leave", addr(tt.leave))).To(Succeed())
			g.Expect(p.Restore("join", addr(tt.join))).To(Succeed())
			g.Expect(p.Restore("gone", addr(tt.graceKept))).To(Succeed())
			p.Release("gone", t0)
			p.SetCursor(addr(tt.keep))
			g.Expect(p.Counts(t0)).To(Equal(Counts{Total: 10, Used: 3, Free: 7, OutOfRange: 1}))

			ns, err := ParseSpec(graced(strategy(tt.to, NextFit), time.Minute))
			g.Expect(err).NotTo(HaveOccurred())
			q, outside, err := p.Rebuild(ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(outside).To(Equal([]string{"leave"}))
			g.Expect(q.Counts(t0)).To(Equal(Counts{Total: 18, Used: 3, Free: 15, OutOfRange: 1}))
			at, ok := q.NextExpiry(t0)
			g.Expect(ok).To(BeTrue())
			g.Expect(at).To(Equal(t0.Add(time.Minute)))
			g.Expect(q.Cursor()).To(Equal(addr(tt.keep)))
			for _, o := range []string{"keep", "leave", "join"} {
				a, _ := p.Lookup(o)
				b, ok := q.Lookup(o)
				g.Expect(ok).To(BeTrue())
				g.Expect(b).To(Equal(a))
			}
			// NextFit goes on after keep, skipping the address in grace.
			a, err := q.Allocate("new", t0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a).To(Equal(addr(tt.graceKept).Next()))
			// p is unchanged.
			g.Expect(p.Counts(t0)).To(Equal(Counts{Total: 10, Used: 3, Free: 7, OutOfRange: 1}))
			g.Expect(q.Spec()).To(BeIdenticalTo(ns))
		})
	}
}

func TestNewRefusesNoSpec(t *testing.T) {
	g := NewWithT(t)
	_, err := New(nil)
	g.Expect(err).To(MatchError(ErrInvalidSpec))
	_, err = New(&Spec{})
	g.Expect(err).To(MatchError(ErrInvalidSpec))
}

func TestCountsSaturate(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.ContivIPPoolSpec
		want int64
	}{
		{"v4 /8", spec("10.0.0.0/8"), 1<<24 - 2},
		{"v4 whole family", spec("0.0.0.0-255.255.255.255"), 1 << 32},
		{"v6 /64", spec("2001:db8::/64"), math.MaxInt64},
		{"v6 /65", spec("2001:db8::/65"), 1<<63 - 1},
		{"v6 /66", spec("2001:db8::/66"), 1<<62 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := mustPool(t, tt.spec)
			a, err := p.Allocate("m", t0)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(a.String()).NotTo(BeEmpty())
			c := p.Counts(t0)
			g.Expect(c.Total).To(Equal(tt.want))
			g.Expect(c.Used).To(Equal(int64(1)))
			g.Expect(c.Free).To(Equal(tt.want - 1))
		})
	}
}

// TestCountsRandom: after random operations the counts add up with what
// the owners hold.
func TestCountsRandom(t *testing.T) {
	tests := []struct {
		name  string
		spec  v1alpha1.ContivIPPoolSpec
		total int64
	}{
		{"v4", nonContiguous4, 6},
		{"v6", nonContiguous6, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := mustPool(t, graced(tt.spec, 3*time.Second))
			r := rand.New(rand.NewPCG(1, 2))
			now := t0
			for i := range 5000 {
				o := fmt.Sprint("o", r.IntN(12))
				switch r.IntN(4) {
				case 0, 1:
					_, err := p.Allocate(o, now)
					if err != nil {
						g.Expect(err).To(MatchError(ErrExhausted))
					}
				case 2:
					p.Release(o, now)
				case 3:
					now = now.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
				}
				c := p.Counts(now)
				held := 0
				for j := range 12 {
					if a, ok := p.Lookup(fmt.Sprint("o", j)); ok {
						g.Expect(p.partOf(a)).NotTo(BeNil())
						held++
					}
				}
				g.Expect(c.Total).To(Equal(tt.total), "step %d", i)
				g.Expect(c.Used).To(Equal(int64(held + len(p.expiry.until))))
				g.Expect(c.Free + c.Used).To(Equal(c.Total))
				g.Expect(c.OutOfRange).To(BeZero())
			}
		})
	}
}
