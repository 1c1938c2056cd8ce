package crash

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/contiv-ipam/agent/plugins/podmanager"
)

func key(cid string) podmanager.AttachmentKey {
	return podmanager.AttachmentKey{Network: "crashnet", ContainerID: cid, IfName: "eth0"}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func alloc(cid, pod, ip string) Allocation {
	return Allocation{Key: key(cid), Pod: pod, Addr: addr(ip)}
}

// TestCheck pins the checker: each rule of Check finds its violation and
// every allowed outcome passes, so that a crash cycle that reports 0
// violations has really been compared.
func TestCheck(t *testing.T) {
	cases := []struct {
		name   string
		record func(l *Ledger)
		got    []Allocation
		want   []string // substrings, one per violation, in Check's order
	}{
		{
			name:   "acknowledged add still held",
			record: func(l *Ledger) { l.AddOK(key("a"), "ns/a", addr("10.1.1.2")) },
			got:    []Allocation{alloc("a", "ns/a", "10.1.1.2")},
		},
		{
			name:   "acknowledged add lost",
			record: func(l *Ledger) { l.AddOK(key("a"), "ns/a", addr("10.1.1.2")) },
			want:   []string{"Add acknowledged 10.1.1.2, now holds nothing"},
		},
		{
			name:   "acknowledged add moved",
			record: func(l *Ledger) { l.AddOK(key("a"), "ns/a", addr("10.1.1.2")) },
			got:    []Allocation{alloc("a", "ns/a", "10.1.1.3")},
			want:   []string{"Add acknowledged 10.1.1.2, now holds 10.1.1.3"},
		},
		{
			name:   "acknowledged add under another pod",
			record: func(l *Ledger) { l.AddOK(key("a"), "ns/a", addr("10.1.1.2")) },
			got:    []Allocation{alloc("a", "ns/b", "10.1.1.2")},
			want:   []string{"added for pod ns/a, reported for pod ns/b"},
		},
		{
			name: "acknowledged delete holds nothing",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
				l.DeleteOK(key("a"))
			},
		},
		{
			name: "acknowledged delete still held",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
				l.DeleteOK(key("a"))
			},
			got:  []Allocation{alloc("a", "ns/a", "10.1.1.2")},
			want: []string{"released (Delete or GC acknowledged), still holds 10.1.1.2"},
		},
		{
			name: "collected by GC holds nothing",
			record: func(l *Ledger) {
				l.AddUnknown(key("a"), "ns/a")
				l.CollectedOK(key("a"))
			},
		},
		{
			name: "collected by GC still held",
			record: func(l *Ledger) {
				l.AddUnknown(key("a"), "ns/a")
				l.CollectedOK(key("a"))
			},
			got:  []Allocation{alloc("a", "ns/a", "10.1.1.2")},
			want: []string{"released (Delete or GC acknowledged), still holds 10.1.1.2"},
		},
		{
			name:   "unknown add may hold any address",
			record: func(l *Ledger) { l.AddUnknown(key("a"), "ns/a") },
			got:    []Allocation{alloc("a", "ns/a", "10.1.1.9")},
		},
		{
			name:   "unknown add may hold nothing",
			record: func(l *Ledger) { l.AddUnknown(key("a"), "ns/a") },
		},
		{
			name: "unknown delete keeps the old address",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
				l.DeleteUnknown(key("a"))
			},
			got: []Allocation{alloc("a", "ns/a", "10.1.1.2")},
		},
		{
			name: "unknown delete released",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
				l.DeleteUnknown(key("a"))
			},
		},
		{
			name: "unknown delete cannot move the address",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
				l.DeleteUnknown(key("a"))
			},
			got:  []Allocation{alloc("a", "ns/a", "10.1.1.7")},
			want: []string{"held 10.1.1.2 before a call with unknown outcome, now holds 10.1.1.7"},
		},
		{
			name: "unknown repeated add keeps the old address",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
				l.AddUnknown(key("a"), "ns/a")
			},
			got:  []Allocation{alloc("a", "ns/a", "10.1.1.4")},
			want: []string{"held 10.1.1.2 before a call with unknown outcome, now holds 10.1.1.4"},
		},
		{
			name: "unknown add after a delete may hold any address",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
				l.DeleteOK(key("a"))
				l.AddUnknown(key("a"), "ns/a")
			},
			got: []Allocation{alloc("a", "ns/a", "10.1.1.4")},
		},
		{
			name: "address held twice",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
				l.AddUnknown(key("b"), "ns/b")
			},
			got:  []Allocation{alloc("a", "ns/a", "10.1.1.2"), alloc("b", "ns/b", "10.1.1.2")},
			want: []string{"address 10.1.1.2 held twice"},
		},
		{
			name: "address held twice across networks",
			record: func(l *Ledger) {
				l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
			},
			got: []Allocation{alloc("a", "ns/a", "10.1.1.2"),
				{Key: podmanager.AttachmentKey{Network: "other", ContainerID: "x", IfName: "eth0"}, Addr: addr("10.1.1.2")}},
			want: []string{"address 10.1.1.2 held twice"},
		},
		{
			name: "a key nobody added",
			got:  []Allocation{alloc("ghost", "ns/ghost", "10.1.1.5")},
			want: []string{"key crashnet/ghost/eth0 holds 10.1.1.5 but no client ever added it"},
		},
		{
			name: "pod-keyed allocations of no network are only checked for clashes",
			got:  []Allocation{{Pod: "kube-system/dns", Addr: addr("10.1.1.5")}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			l := NewLedger()
			if c.record != nil {
				c.record(l)
			}
			v := Check([]*Ledger{l}, "crashnet", c.got)
			g.Expect(v).To(HaveLen(len(c.want)), "violations: %q", v)
			for i, w := range c.want {
				g.Expect(v[i]).To(ContainSubstring(w))
			}
		})
	}
}

// TestLedgerFigures pins the counts and the key lists the crash test
// prints and resolves.
func TestLedgerFigures(t *testing.T) {
	g := NewWithT(t)
	l := NewLedger()
	l.AddOK(key("a"), "ns/a", addr("10.1.1.2"))
	l.AddOK(key("b"), "ns/b", addr("10.1.1.3"))
	l.DeleteOK(key("b"))
	l.AddUnknown(key("c"), "ns/c")
	l.AddOK(key("d"), "ns/d", addr("10.1.1.4"))
	l.DeleteUnknown(key("d"))
	l.AddUnknown(key("e"), "ns/e")
	l.CollectedOK(key("e"))

	g.Expect(l.AddsOK).To(Equal(3))
	g.Expect(l.DeletesOK).To(Equal(1))
	g.Expect(l.Unknowns).To(Equal(3))
	g.Expect(l.Collected).To(Equal(1))
	g.Expect(l.Held()).To(Equal([]podmanager.AttachmentKey{key("a")}))
	g.Expect(l.Unknown()).To(Equal([]podmanager.AttachmentKey{key("c"), key("d")}))
	ip, ok := l.Addr(key("a"))
	g.Expect(ok).To(BeTrue())
	g.Expect(ip).To(Equal(addr("10.1.1.2")))
	_, ok = l.Addr(key("d"))
	g.Expect(ok).To(BeFalse())
	g.Expect(l.Pod(key("d"))).To(Equal("ns/d"))
}
