package nodeipamdiff

import (
	"testing"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam/cidrset"

	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// TestDifferencesOnPurpose pins, one subtest each, where our allocator
// and Kubernetes' differ, and asserts both sides' behaviour.
func TestDifferencesOnPurpose(t *testing.T) {
	// Kubernetes' cidrset keeps one bit per block in a big.Int and refuses
	// an IPv6 node mask more than 16 bits longer than the cluster range
	// (ErrCIDRSetSubNetTooBig); IPv4 has no such limit there. Ours counts
	// blocks with 64-bit indices in ipalloc's sparse bitmap: up to 64 bits.
	t.Run("k8s refuses an IPv6 node mask more than 16 bits longer, ours takes up to 64", func(t *testing.T) {
		rows := []struct {
			name      string
			su        setup
			k8sOK     bool
			oursOK    bool
			first     []string // what ours hands out first
			alsoFirst bool     // k8s hands out the same
		}{
			{"fd00::/96 by /112: 16 bits, both", setup{clusters: []string{"fd00::/96"}, v6Mask: 112}, true, true,
				[]string{"fd00::/112", "fd00::1:0/112"}, true},
			{"fd00::/96 by /113: 17 bits, ours only", setup{clusters: []string{"fd00::/96"}, v6Mask: 113}, false, true,
				[]string{"fd00::/113", "fd00::8000/113"}, false},
			{"fd00::/48 by /112: 64 bits, ours only", setup{clusters: []string{"fd00::/48"}, v6Mask: 112}, false, true,
				[]string{"fd00::/112", "fd00::1:0/112"}, false},
			{"fd00::/48 by /113: 65 bits, neither", setup{clusters: []string{"fd00::/48"}, v6Mask: 113}, false, false, nil, false},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, kerr := newK8s(t, row.su)
				ours, oerr := newOurs(t, row.su)
				if row.k8sOK {
					g.Expect(kerr).NotTo(HaveOccurred())
				} else {
					g.Expect(kerr).To(MatchError(cidrset.ErrCIDRSetSubNetTooBig))
				}
				if !row.oursOK {
					g.Expect(oerr).To(MatchError(ContainSubstring("want 48 to 112")))
					return
				}
				g.Expect(oerr).NotTo(HaveOccurred())
				for i, want := range row.first {
					name := string(rune('a' + i))
					got, err := ours.add(t, newNode(name))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(got).To(Equal([]string{want}))
					if row.alsoFirst {
						got, err := k8s.add(t, newNode(name))
						g.Expect(err).NotTo(HaveOccurred())
						g.Expect(got).To(Equal([]string{want}))
					}
				}
			})
		}
	})

	// A node that holds a CIDR another node holds (a restore from backup,
	// a hand edit): Kubernetes occupies it again without a word, so both
	// hold it, and releasing either frees the block while the other still
	// holds it; the next node gets it too. Ours reports it (a Warning
	// event, reason CIDRConflict) and the first holder keeps the block:
	// releasing the second node leaves it taken.
	t.Run("a node holding another node's CIDR: k8s lets both hold it, ours reports CIDRConflict and the first holder keeps it", func(t *testing.T) {
		rows := []struct {
			name         string
			su           setup
			shared       string
			k8sNext      string // k8s gives the next node the shared block again
			oursNext     string
			secondHolder string
		}{
			{"IPv4", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24, existing: []*v1.Node{newNode("a", "10.0.0.0/24")}},
				"10.0.0.0/24", "10.0.0.0/24", "10.0.1.0/24", "b"},
			{"IPv6", setup{clusters: []string{"fd00::/112"}, v6Mask: 120, existing: []*v1.Node{newNode("a", "fd00::/120")}},
				"fd00::/120", "fd00::/120", "fd00::100/120", "b"},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, ours := both(t, row.su)
				got, err := k8s.add(t, newNode("b", row.shared))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal([]string{row.shared}))
				got, err = ours.add(t, newNode("b", row.shared))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal([]string{row.shared}))
				g.Expect(ours.warnings()).To(ConsistOf(nodeipam.ReasonCIDRConflict))

				g.Expect(k8s.del(t, "b")).To(Succeed())
				g.Expect(ours.del(t, "b")).To(Succeed())
				got, err = k8s.add(t, newNode("c"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal([]string{row.k8sNext}), "k8s: the block a still holds is free again")
				got, err = ours.add(t, newNode("c"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal([]string{row.oursNext}), "ours: a keeps its block")
			})
		}
	})

	// When the first holder of a shared CIDR goes, Kubernetes frees the
	// block although the second node still holds it, and takes it back
	// only when the second node is synced again (Occupy is idempotent).
	// Ours records the second holder at the conflict and passes the block
	// to it, so the block is never free while a node holds it (this test
	// found that ours first freed it, like Kubernetes, and did not take it
	// back on the resync). Both give the next node the next block.
	t.Run("the first holder of a shared CIDR goes: the second keeps the block", func(t *testing.T) {
		rows := []struct {
			name              string
			su                setup
			shared            string
			k8sNext, oursNext string
		}{
			{"IPv4", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24, existing: []*v1.Node{newNode("a", "10.0.0.0/24")}},
				"10.0.0.0/24", "10.0.1.0/24", "10.0.1.0/24"},
			{"IPv6", setup{clusters: []string{"fd00::/112"}, v6Mask: 120, existing: []*v1.Node{newNode("a", "fd00::/120")}},
				"fd00::/120", "fd00::100/120", "fd00::100/120"},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, ours := both(t, row.su)
				for _, c := range []struct {
					s    *side
					next string
				}{{k8s, row.k8sNext}, {ours, row.oursNext}} {
					_, err := c.s.add(t, newNode("b", row.shared))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(c.s.del(t, "a")).To(Succeed())
					got, err := c.s.sync(t, "b") // a resync of b
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(got).To(Equal([]string{row.shared}))
					got, err = c.s.add(t, newNode("c"))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(got).To(Equal([]string{c.next}), c.s.name)
				}
			})
		}
	})

	// A node that holds a CIDR outside every cluster range (the cluster
	// range was changed): Kubernetes' Occupy fails, AllocateOrOccupyCIDR
	// returns the error (Run would retry it forever) and a node list
	// holding it makes NewCIDRRangeAllocator fail (the controller manager
	// does not start). Ours reports it (a Warning event, reason
	// CIDROutOfRange), leaves the node as it is and returns nil, at start
	// and afterwards.
	t.Run("a node holding a CIDR outside the cluster range: k8s returns an error, ours reports CIDROutOfRange and returns nil", func(t *testing.T) {
		rows := []struct {
			name    string
			su      setup
			outside string
			first   string
		}{
			{"IPv4", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24}, "192.168.0.0/24", "10.0.0.0/24"},
			{"IPv6", setup{clusters: []string{"fd00::/112"}, v6Mask: 120}, "fd01::/120", "fd00::/120"},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, ours := both(t, row.su)
				got, err := k8s.add(t, newNode("a", row.outside))
				g.Expect(err).To(MatchError(ContainSubstring("is out the range of cluster cidr")))
				g.Expect(got).To(Equal([]string{row.outside}))
				got, err = ours.add(t, newNode("a", row.outside))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal([]string{row.outside}))
				g.Expect(ours.warnings()).To(ConsistOf(nodeipam.ReasonCIDROutOfRange))
				// Neither takes anything for it.
				_, ours2 := step(t, k8s, ours, "+b")
				g.Expect(ours2).To(BeFalse())
				g.Expect(k8s.get(t, "b").Spec.PodCIDRs).To(Equal([]string{row.first}))

				// At start.
				su := row.su
				su.existing = []*v1.Node{newNode("a", row.outside)}
				_, kerr := newK8s(t, su)
				g.Expect(kerr).To(MatchError(ContainSubstring("is out the range of cluster cidr")))
				ours, oerr := newOurs(t, su)
				g.Expect(oerr).NotTo(HaveOccurred())
				g.Expect(ours.warnings()).To(ConsistOf(nodeipam.ReasonCIDROutOfRange))
			})
		}
	})

	// Dual-stack, the second range full, the first not: Kubernetes has
	// already taken a block of the first range and keeps it (its comment:
	// a leak until the controller restarts), so that range runs out one
	// node early. Ours gives the first block back before it returns the
	// error.
	t.Run("dual-stack, the second range full: k8s keeps the block it took from the first, ours gives it back", func(t *testing.T) {
		rows := []struct {
			name       string
			su         setup
			n1, n2, n3 []string
			oursN4     []string
		}{
			{"IPv4 first", setup{clusters: []string{"10.0.0.0/24", "fd00::/120"}, v4Mask: 26, v6Mask: 122,
				existing: []*v1.Node{newNode("x", "10.0.0.0/26", "fd00::/121")}},
				[]string{"10.0.0.64/26", "fd00::80/122"}, []string{"10.0.0.128/26", "fd00::c0/122"},
				[]string{"10.0.0.0/26", "fd00::/122"}, []string{"10.0.0.192/26", "fd00::40/122"}},
			{"IPv6 first", setup{clusters: []string{"fd00::/120", "10.0.0.0/24"}, v4Mask: 26, v6Mask: 122,
				existing: []*v1.Node{newNode("x", "fd00::/122", "10.0.0.0/25")}},
				[]string{"fd00::40/122", "10.0.0.128/26"}, []string{"fd00::80/122", "10.0.0.192/26"},
				[]string{"fd00::/122", "10.0.0.0/26"}, []string{"fd00::c0/122", "10.0.0.64/26"}},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, ours := both(t, row.su)
				cidrs, _ := step(t, k8s, ours, "+n1")
				g.Expect(cidrs).To(Equal(row.n1))
				cidrs, _ = step(t, k8s, ours, "+n2")
				g.Expect(cidrs).To(Equal(row.n2))
				_, refused := step(t, k8s, ours, "+n3") // the second range is full
				g.Expect(refused).To(BeTrue())
				step(t, k8s, ours, "-x")
				cidrs, _ = step(t, k8s, ours, "~n3")
				g.Expect(cidrs).To(Equal(row.n3))

				got, err := k8s.add(t, newNode("n4"))
				g.Expect(err).To(MatchError(ContainSubstring("failed to allocate cidr from cluster cidr at idx:0")))
				g.Expect(got).To(BeEmpty(), "k8s: the first range's last block went to n3's refused try and stays taken")
				got, err = ours.add(t, newNode("n4"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(row.oursN4))
			})
		}
	})

	// A node that holds a CIDR inside the service range (a hand edit, or
	// the service range was moved): Kubernetes marks the service blocks as
	// allocated, so occupying the node's CIDR changes nothing, but
	// releasing it frees the service block, which the next node then gets.
	// Ours excludes the service blocks for good: they are never handed out.
	t.Run("a node holding a block of the service range goes: k8s hands the service block out, ours keeps it excluded", func(t *testing.T) {
		rows := []struct {
			name              string
			su                setup
			k8sNext, oursNext string
		}{
			{"IPv4", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24, service: "10.0.0.0/24",
				existing: []*v1.Node{newNode("x", "10.0.0.0/24")}}, "10.0.0.0/24", "10.0.1.0/24"},
			{"IPv6", setup{clusters: []string{"fd00::/112"}, v6Mask: 120, service: "fd00::/120",
				existing: []*v1.Node{newNode("x", "fd00::/120")}}, "fd00::/120", "fd00::100/120"},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, ours := both(t, row.su)
				g.Expect(k8s.del(t, "x")).To(Succeed())
				g.Expect(ours.del(t, "x")).To(Succeed())
				got, err := k8s.add(t, newNode("a"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal([]string{row.k8sNext}))
				got, err = ours.add(t, newNode("a"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal([]string{row.oursNext}))
				g.Expect(ours.warnings()).To(BeEmpty(), "ours does not report a node inside the service range")
			})
		}
	})

	// The node mask shorter than the cluster range: Kubernetes' cidrset
	// counts 1<<(node mask - cluster mask) blocks, which is 0 here, so
	// the allocator starts and refuses every node (kube-controller-
	// manager refuses the flags before it builds the allocator). Ours
	// refuses the config: it can never hand out a CIDR.
	t.Run("a node mask shorter than the cluster range: k8s accepts and never allocates, ours refuses", func(t *testing.T) {
		rows := []struct {
			name string
			su   setup
			want string
		}{
			{"IPv4 /16 by /12", setup{clusters: []string{"10.0.0.0/16"}, v4Mask: 12}, "nodeCIDRMaskSizeIPv4 12 for clusterCIDRs[0] 10.0.0.0/16: want 16 to 32"},
			{"IPv6 /64 by /48", setup{clusters: []string{"fd00::/64"}, v6Mask: 48}, "nodeCIDRMaskSizeIPv6 48 for clusterCIDRs[0] fd00::/64: want 64 to 128"},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, kerr := newK8s(t, row.su)
				g.Expect(kerr).NotTo(HaveOccurred())
				got, err := k8s.add(t, newNode("a"))
				g.Expect(err).To(MatchError(ContainSubstring(cidrset.ErrCIDRRangeNoCIDRsRemaining.Error())))
				g.Expect(got).To(BeEmpty())
				_, oerr := newOurs(t, row.su)
				g.Expect(oerr).To(MatchError(ContainSubstring(row.want)))
			})
		}
	})

	// Two cluster ranges of one family: Kubernetes' allocator takes them
	// and gives every node a block of each, two pod CIDRs of one family,
	// which the API server refuses on a real Node (kube-controller-
	// manager refuses the flags: it wants one range per family). Ours
	// refuses the config.
	t.Run("two cluster ranges of one family: k8s gives a node two CIDRs of it, ours refuses", func(t *testing.T) {
		rows := []struct {
			name  string
			su    setup
			first []string
			want  string
		}{
			{"IPv4", setup{clusters: []string{"10.0.0.0/20", "10.1.0.0/20"}, v4Mask: 24},
				[]string{"10.0.0.0/24", "10.1.0.0/24"}, `clusterCIDRs[1] "10.1.0.0/20": a second IPv4 range (the first is 10.0.0.0/20)`},
			{"IPv6", setup{clusters: []string{"fd00::/112", "fd01::/112"}, v6Mask: 120},
				[]string{"fd00::/120", "fd01::/120"}, `clusterCIDRs[1] "fd01::/112": a second IPv6 range (the first is fd00::/112)`},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, kerr := newK8s(t, row.su)
				g.Expect(kerr).NotTo(HaveOccurred())
				got, err := k8s.add(t, newNode("a"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(row.first))
				_, oerr := newOurs(t, row.su)
				g.Expect(oerr).To(MatchError(ContainSubstring(row.want)))
			})
		}
	})

	// A service range that covers every block: Kubernetes marks them all
	// taken and starts, then refuses every node. Ours refuses the config.
	t.Run("a service range covering every block: k8s accepts and never allocates, ours refuses", func(t *testing.T) {
		rows := []struct {
			name string
			su   setup
		}{
			{"IPv4, the service range larger", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24, service: "10.0.0.0/16"}},
			{"IPv4, the same range", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24, service: "10.0.0.0/20"}},
			{"IPv6, the service range larger", setup{clusters: []string{"fd00::/112"}, v6Mask: 120, service: "fd00::/64"}},
			{"dual-stack, the secondary covers the IPv6 range", setup{clusters: []string{"10.0.0.0/20", "fd00::/112"}, v4Mask: 24, v6Mask: 120,
				service: "10.96.0.0/12", secondary: "fd00::/112"}},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				g := NewWithT(t)
				k8s, kerr := newK8s(t, row.su)
				g.Expect(kerr).NotTo(HaveOccurred())
				got, err := k8s.add(t, newNode("a"))
				g.Expect(err).To(MatchError(ContainSubstring(cidrset.ErrCIDRRangeNoCIDRsRemaining.Error())))
				g.Expect(got).To(BeEmpty())
				_, oerr := newOurs(t, row.su)
				g.Expect(oerr).To(MatchError(ContainSubstring("cover every block")))
			})
		}
	})

	// A Node whose pod CIDR is not a CIDR (the API server validates the
	// field, so a hand-made object or a restore): Kubernetes' allocator
	// fails to start on it (the controller manager crash-loops: its own
	// comment) and returns an error for it later. Ours reports it (a
	// Warning event, reason CloudCIDRAllocatorInvalidPodCIDR), leaves it
	// as it is and serves the other nodes.
	t.Run("a node whose pod CIDR is not a CIDR: k8s fails to start, ours reports it and starts", func(t *testing.T) {
		for _, su := range []setup{
			{clusters: []string{"10.0.0.0/20"}, v4Mask: 24},
			{clusters: []string{"fd00::/112"}, v6Mask: 120},
		} {
			t.Run(su.clusters[0], func(t *testing.T) {
				g := NewWithT(t)
				bad := su
				bad.existing = []*v1.Node{newNode("x", "not-a-cidr")}
				_, kerr := newK8s(t, bad)
				g.Expect(kerr).To(MatchError(ContainSubstring("failed to parse node x")))
				ours, oerr := newOurs(t, bad)
				g.Expect(oerr).NotTo(HaveOccurred())
				g.Expect(ours.warnings()).To(ConsistOf(nodeipam.ReasonInvalidPodCIDR))

				// Afterwards: k8s returns an error for such a node, ours
				// reports it; both serve the next node.
				k8s, ours := both(t, su)
				_, err := k8s.add(t, newNode("y", "not-a-cidr"))
				g.Expect(err).To(MatchError(ContainSubstring("failed to parse node y")))
				_, err = ours.add(t, newNode("y", "not-a-cidr"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ours.warnings()).To(ConsistOf(nodeipam.ReasonInvalidPodCIDR))
				step(t, k8s, ours, "+a")
			})
		}
	})
}
