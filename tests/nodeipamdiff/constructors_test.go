package nodeipamdiff

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam/cidrset"
)

// constructorDifferences are the configurations that one range allocator
// takes and the other refuses, on purpose; TestDifferencesOnPurpose pins
// each one. TestConstructorsDifferOnlyWhereNamed fails on a disagreement
// that is not one of these, and on one of these that it does not meet.
var constructorDifferences = []namedDifference{
	{"ipv6-mask-over-16-bits",
		"an IPv6 node mask 17 to 64 bits longer than the cluster range: k8s refuses it, ours takes it",
		"ours counts blocks with 64-bit indices in a sparse bitmap; k8s's big.Int bitmap is the limit"},
	{"node-mask-shorter",
		"a node mask shorter than the cluster range: k8s's allocator takes it and never allocates, ours refuses it",
		"a config that can never allocate is refused at start (kube-controller-manager refuses it too)"},
	{"two-ranges-one-family",
		"two cluster ranges of one family (or more than two ranges): k8s's allocator takes them and gives a node two CIDRs of one family, ours refuses them",
		"the API server refuses such a Node and kube-controller-manager refuses the flags"},
	{"service-covers-every-block",
		"a service range covering every block: k8s takes it and never allocates, ours refuses it",
		"a config that can never allocate is refused at start"},
	{"malformed-pod-cidr-at-start",
		"a Node whose pod CIDR is not a CIDR: k8s fails to start, ours reports it and starts",
		"one bad Node must not stop the pod CIDRs of all the others"},
	{"out-of-range-pod-cidr-at-start",
		"a Node whose pod CIDR is outside the cluster ranges: k8s fails to start, ours reports it and starts",
		"one bad Node must not stop the pod CIDRs of all the others"},
	{"pod-cidrs-by-position",
		"a dual-stack cluster and a Node with one pod CIDR, of the second range's family: k8s pairs a Node's CIDRs with the ranges by position, finds it outside the first and fails to start; ours pairs them by family and starts",
		"a single-stack Node of a cluster made dual-stack with the other family first is in range"},
}

// constructorGrid is every combination of cluster ranges, node mask
// sizes (shorter than the range, equal, 4 and 8 bits longer, and 17 bits
// for IPv6, which Kubernetes refuses), service ranges (none, inside,
// outside, covering a range) and a Node that holds a value (none, not a
// CIDR, outside, inside, covering the IPv4 range from before it). The ranges are small: a service range that
// covers 2^16 blocks or more costs a second under -race.
func constructorGrid() []setup {
	clusters := [][]string{
		{"10.0.16.0/20"}, {"fd00::/104"}, {"10.0.16.0/20", "fd00::/104"}, {"fd00::/104", "10.0.16.0/20"},
		{"10.0.16.0/20", "10.1.16.0/20"}, {"fd00::/104", "fd01::/104"}, {"10.0.16.0/20", "fd00::/104", "10.1.16.0/20"},
	}
	v4Masks := []int{16, 20, 24, 28}
	v6Masks := []int{96, 104, 108, 112, 121}
	services := [][2]string{{"", ""}, {"10.0.17.0/24", ""}, {"10.0.0.0/16", ""}, {"192.168.0.0/24", ""},
		{"10.96.0.0/12", "fd00::/64"}, {"10.96.0.0/12", "fd00::1:0/112"}}
	existing := [][]*v1.Node{nil, {newNode("x", "not-a-cidr")}, {newNode("x", "192.168.5.0/24")}, {newNode("x", "10.0.19.0/24")},
		{newNode("x", "10.0.0.0/16")}}
	var out []setup
	for _, c := range clusters {
		has4 := slices.ContainsFunc(c, func(s string) bool { return !strings.Contains(s, ":") })
		has6 := slices.ContainsFunc(c, func(s string) bool { return strings.Contains(s, ":") })
		m4, m6 := []int{24}, []int{112}
		if has4 {
			m4 = v4Masks
		}
		if has6 {
			m6 = v6Masks
		}
		for _, a := range m4 {
			for _, b := range m6 {
				for _, s := range services {
					if b == 121 && s[1] == "fd00::/64" {
						continue // our side would list 2^17 excluded blocks: slow under -race, and k8s refuses 121 anyway
					}
					for _, x := range existing {
						out = append(out, setup{clusters: c, v4Mask: a, v6Mask: b, service: s[0], secondary: s[1], existing: x})
					}
				}
			}
		}
	}
	return out
}

// classify names the difference when exactly one constructor refused:
// every line of ours' refusal, or k8s's refusal, must be a named one.
func classify(su setup, kerr, oerr error) (string, bool) {
	switch {
	case kerr != nil && oerr == nil:
		msg := kerr.Error()
		switch {
		case errors.Is(kerr, cidrset.ErrCIDRSetSubNetTooBig):
			return "ipv6-mask-over-16-bits", true
		case strings.Contains(msg, "failed to parse node"):
			return "malformed-pod-cidr-at-start", true
		case strings.Contains(msg, "is out the range of cluster cidr") && existingInRange(su):
			return "pod-cidrs-by-position", true
		case strings.Contains(msg, "is out the range of cluster cidr"):
			return "out-of-range-pod-cidr-at-start", true
		}
	case kerr == nil && oerr != nil:
		key := ""
		for _, line := range strings.Split(strings.TrimPrefix(oerr.Error(), "nodeipam: "), "\n") {
			var k string
			switch {
			case strings.Contains(line, "a second IPv"), strings.Contains(line, "want at most two"):
				k = "two-ranges-one-family"
			case strings.Contains(line, "cover every block"):
				k = "service-covers-every-block"
			case strings.Contains(line, "nodeCIDRMaskSize") && maskShorter(su):
				k = "node-mask-shorter"
			default:
				return "", false
			}
			if key == "" {
				key = k
			}
		}
		return key, true
	}
	return "", false
}

// maskShorter tells whether a node mask is shorter than its cluster range.
func maskShorter(su setup) bool {
	for _, c := range su.clusters {
		if su.maskOf(c) < netip.MustParsePrefix(c).Bits() {
			return true
		}
	}
	return false
}

// TestConstructorsDifferOnlyWhereNamed builds both range allocators on
// every configuration of constructorGrid: both must take it or both
// refuse it, unless the difference is named; where both take it, both
// give the first new node the same CIDRs. Where k8s takes a
// configuration that ours refuses, the first node k8s serves is
// checked too.
func TestConstructorsDifferOnlyWhereNamed(t *testing.T) {
	hits := make(map[string]int)
	agreed := 0
	for _, su := range constructorGrid() {
		k8s, kerr := newK8s(t, su)
		ours, oerr := newOurs(t, su)
		name := fmt.Sprintf("%v v4 /%d v6 /%d service %q %q existing %v", su.clusters, su.v4Mask, su.v6Mask,
			su.service, su.secondary, existingCIDRs(su))
		if (kerr == nil) == (oerr == nil) {
			agreed++
			if kerr != nil {
				continue
			}
			kc, ke := k8s.add(t, newNode("new"))
			oc, oe := ours.add(t, newNode("new"))
			if !slices.Equal(kc, oc) || (ke == nil) != (oe == nil) {
				t.Errorf("%s: the first node: k8s %v (%v), ours %v (%v)", name, kc, ke, oc, oe)
			}
			continue
		}
		key, ok := classify(su, kerr, oerr)
		if !ok {
			t.Errorf("%s: an unnamed difference: k8s %v; ours %v", name, kerr, oerr)
			continue
		}
		hits[key]++
		if kerr == nil && key != "two-ranges-one-family" {
			// k8s took a configuration that can never allocate.
			if got, err := k8s.add(t, newNode("new")); err == nil || len(got) > 0 {
				t.Errorf("%s (%s): k8s gave the first node %v, err %v; the reason given for refusing is wrong", name, key, got, err)
			}
		}
	}
	t.Logf("%d configurations agree; named differences met: %v", agreed, hits)
	for _, d := range constructorDifferences {
		if hits[d.key] == 0 {
			t.Errorf("named difference %q was not met: is it gone? (%s)", d.key, d.what)
		}
	}
}

func existingCIDRs(su setup) []string {
	var out []string
	for _, n := range su.existing {
		out = append(out, n.Spec.PodCIDRs...)
	}
	return out
}

// existingInRange tells whether every CIDR of the existing nodes is
// inside a cluster range.
func existingInRange(su setup) bool {
	for _, c := range existingCIDRs(su) {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return false
		}
		if !slices.ContainsFunc(su.clusters, func(r string) bool { return netip.MustParsePrefix(r).Contains(p.Addr()) }) {
			return false
		}
	}
	return true
}
