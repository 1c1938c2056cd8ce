package nodeipamdiff

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
)

var seedFlag = flag.Uint64("seed", 0, "seed of TestRandomSequenceGivesTheSameCIDRs (0: the clock)")

// script is the scripted sequence: adds, deletes in the middle and at the
// start of the range, and adds after them (next-fit goes on after the
// last block handed out, it does not refill the hole at once).
const script = "+a +b +c -b +d +e -a -d +f +g +h -c +i +j -e -f +k +l -g +m"

// sequenceRows are the configurations the scripted sequence runs on, IPv4
// and IPv6 side by side.
var sequenceRows = []struct {
	name string
	su   setup
}{
	{"IPv4 /20 by /24", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24}},
	{"IPv6 /112 by /120", setup{clusters: []string{"fd00::/112"}, v6Mask: 120}},
	{"IPv4 /16 by /26", setup{clusters: []string{"10.1.0.0/16"}, v4Mask: 26}},
	{"IPv6 /48 by /64", setup{clusters: []string{"fd00:1::/48"}, v6Mask: 64}},
	{"IPv4 /20 by /24, service /23 inside", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24, service: "10.0.2.0/23"}},
	{"IPv6 /112 by /120, service /119 inside", setup{clusters: []string{"fd00::/112"}, v6Mask: 120, service: "fd00::200/119"}},
	{"IPv4 /20 by /24, service /28 inside the first block", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24, service: "10.0.0.16/28"}},
	{"IPv6 /112 by /120, service /124 inside the first block", setup{clusters: []string{"fd00::/112"}, v6Mask: 120, service: "fd00::10/124"}},
	{"dual-stack IPv4 first", setup{clusters: []string{"10.0.0.0/20", "fd00::/112"}, v4Mask: 24, v6Mask: 120}},
	{"dual-stack IPv6 first", setup{clusters: []string{"fd00::/112", "10.0.0.0/20"}, v4Mask: 24, v6Mask: 120}},
	{"dual-stack, both service ranges", setup{clusters: []string{"10.0.0.0/20", "fd00::/112"}, v4Mask: 24, v6Mask: 120,
		service: "10.0.1.0/24", secondary: "fd00::300/120"}},
	{"IPv4, existing nodes", setup{clusters: []string{"10.0.0.0/20"}, v4Mask: 24, existing: []*v1.Node{
		newNode("x1", "10.0.0.0/24"), newNode("x2", "10.0.3.0/24"), newNode("x3", "10.0.4.0/23")}}},
	{"IPv6, existing nodes", setup{clusters: []string{"fd00::/112"}, v6Mask: 120, existing: []*v1.Node{
		newNode("x1", "fd00::/120"), newNode("x2", "fd00::300/120"), newNode("x3", "fd00::400/119")}}},
	{"dual-stack, existing nodes and service ranges", setup{clusters: []string{"10.0.0.0/20", "fd00::/112"}, v4Mask: 24, v6Mask: 120,
		service: "10.0.2.0/24", secondary: "fd00::500/120",
		existing: []*v1.Node{newNode("x1", "10.0.1.0/24", "fd00::100/120"), newNode("x2", "10.0.0.0/24", "fd00::/120")}}},
}

func TestScriptedSequenceGivesTheSameCIDRs(t *testing.T) {
	for _, row := range sequenceRows {
		t.Run(row.name, func(t *testing.T) {
			g := NewWithT(t)
			k8s, ours := both(t, row.su)
			got := make(map[string][]string)
			for _, o := range strings.Fields(script) {
				cidrs, refused := step(t, k8s, ours, op(o))
				g.Expect(refused).To(BeFalse(), "%s was refused", o)
				if o[0] == '+' {
					got[o[1:]] = cidrs
				}
			}
			for _, x := range row.su.existing {
				g.Expect(k8s.get(t, x.Name).Spec.PodCIDRs).To(Equal(x.Spec.PodCIDRs))
				g.Expect(ours.get(t, x.Name).Spec.PodCIDRs).To(Equal(x.Spec.PodCIDRs))
			}
			t.Logf("both gave %v", got)
		})
	}
}

// randomRows are small ranges, so that the random sequences run them
// full, wrap around and free blocks on the way. In the dual-stack row the
// first range has no more blocks than the second: every node holds one of
// each, so the first one is full first (Kubernetes keeps the first
// family's block when the second one is full; see
// TestDifferencesOnPurpose).
var randomRows = []struct {
	name  string
	su    setup
	steps int
}{
	{"IPv4 /24 by /28", setup{clusters: []string{"10.0.0.0/24"}, v4Mask: 28}, 2000},
	{"IPv6 /120 by /124", setup{clusters: []string{"fd00::/120"}, v6Mask: 124}, 2000},
	{"IPv4 /24 by /28, service and existing nodes", setup{clusters: []string{"10.0.0.0/24"}, v4Mask: 28,
		service: "10.0.0.32/27", existing: []*v1.Node{newNode("x1", "10.0.0.0/28"), newNode("x2", "10.0.0.128/27")}}, 2000},
	{"IPv6 /120 by /124, service and existing nodes", setup{clusters: []string{"fd00::/120"}, v6Mask: 124,
		service: "fd00::20/123", existing: []*v1.Node{newNode("x1", "fd00::/124"), newNode("x2", "fd00::80/123")}}, 2000},
	{"dual-stack, service ranges", setup{clusters: []string{"10.0.0.0/24", "fd00::/64"}, v4Mask: 28, v6Mask: 68,
		service: "10.0.0.0/28", secondary: "fd00::f000:0:0:0/68"}, 2000},
	{"IPv4 /16 by /26", setup{clusters: []string{"10.1.0.0/16"}, v4Mask: 26}, 5000},
	{"IPv6 /48 by /58", setup{clusters: []string{"fd00:1::/48"}, v6Mask: 58}, 5000},
}

func TestRandomSequenceGivesTheSameCIDRs(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -args -seed %d)", seed, seed)
	for i, row := range randomRows {
		t.Run(row.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			k8s, ours := both(t, row.su)
			// A node is absent, holds CIDRs, or was refused (waits).
			const absent, holding, waiting = 0, 1, 2
			state := make(map[string]int)
			for _, x := range row.su.existing {
				state[x.Name] = holding
			}
			names := make([]string, 0, 64)
			for j := range 40 {
				names = append(names, fmt.Sprintf("n%02d", j))
			}
			names = append(names, "x1", "x2")
			refusals, at, last := 0, 0, op("")
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("failed at step %d (%s); seed %d", at, last, seed)
				}
			})
			for s := range row.steps {
				name := names[rng.IntN(len(names))]
				if len(row.su.existing) == 0 && name[0] == 'x' {
					continue
				}
				var o op
				switch state[name] {
				case absent:
					o = op("+" + name)
				case holding:
					o = op("-" + name)
				case waiting:
					o = op([]string{"~", "-"}[rng.IntN(2)] + name)
				}
				at, last = s, o
				_, refused := step(t, k8s, ours, o)
				switch {
				case o[0] == '-':
					state[name] = absent
				case refused:
					state[name] = waiting
					refusals++
				default:
					state[name] = holding
				}
			}
			t.Logf("%d steps, %d refusals", row.steps, refusals)
		})
	}
}

// TestExhaustionAtTheSameMoment fills a small range: both refuse the same
// node (ours with an error wrapping ErrNoCIDRsRemaining, which step
// checks), give a freed block to the refused node when it is retried, and
// then hand out the other freed blocks next-fit: the first free one after
// the last handed out, wrapping around, not the lowest.
func TestExhaustionAtTheSameMoment(t *testing.T) {
	rows := []struct {
		name   string
		su     setup
		blocks int // blocks that can be handed out
	}{
		{"IPv4 /28 by /30", setup{clusters: []string{"10.0.0.0/28"}, v4Mask: 30}, 4},
		{"IPv6 /124 by /126", setup{clusters: []string{"fd00::/124"}, v6Mask: 126}, 4},
		{"IPv4 /28 by /30, service /30", setup{clusters: []string{"10.0.0.0/28"}, v4Mask: 30, service: "10.0.0.4/30"}, 3},
		{"IPv6 /124 by /126, service /126", setup{clusters: []string{"fd00::/124"}, v6Mask: 126, service: "fd00::4/126"}, 3},
		{"IPv4 /28 by /30, service /31 inside a block", setup{clusters: []string{"10.0.0.0/28"}, v4Mask: 30, service: "10.0.0.10/31"}, 3},
		{"IPv6 /124 by /126, service /127 inside a block", setup{clusters: []string{"fd00::/124"}, v6Mask: 126, service: "fd00::a/127"}, 3},
		{"IPv4 /27 by /30, service /29", setup{clusters: []string{"10.0.0.0/27"}, v4Mask: 30, service: "10.0.0.8/29"}, 6},
		{"IPv6 /123 by /126, service /125", setup{clusters: []string{"fd00::/123"}, v6Mask: 126, service: "fd00::8/125"}, 6},
		{"dual-stack, both full together", setup{clusters: []string{"10.0.0.0/28", "fd00::/124"}, v4Mask: 30, v6Mask: 126,
			service: "10.0.0.4/30", secondary: "fd00::4/126"}, 3},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			g := NewWithT(t)
			k8s, ours := both(t, row.su)
			held := make([][]string, 0, row.blocks)
			for i := range row.blocks {
				cidrs, refused := step(t, k8s, ours, op(fmt.Sprintf("+n%d", i)))
				g.Expect(refused).To(BeFalse(), "n%d refused, with %d blocks", i, row.blocks)
				held = append(held, cidrs)
			}
			refusedNode := fmt.Sprintf("n%d", row.blocks)
			cidrs, refused := step(t, k8s, ours, op("+"+refusedNode))
			g.Expect(refused).To(BeTrue(), "%s got %v", refusedNode, cidrs)
			g.Expect(cidrs).To(BeEmpty())

			// n1 goes: the refused node, retried, gets its blocks.
			step(t, k8s, ours, "-n1")
			cidrs, refused = step(t, k8s, ours, op("~"+refusedNode))
			g.Expect(refused).To(BeFalse())
			g.Expect(cidrs).To(Equal(held[1]))

			// n0 and n2 go: next-fit hands out n2's blocks first (they
			// come after n1's, the last handed out), then n0's.
			step(t, k8s, ours, "-n0")
			step(t, k8s, ours, "-n2")
			cidrs, _ = step(t, k8s, ours, "+m1")
			g.Expect(cidrs).To(Equal(held[2]))
			cidrs, _ = step(t, k8s, ours, "+m2")
			g.Expect(cidrs).To(Equal(held[0]))
			_, refused = step(t, k8s, ours, "+m3")
			g.Expect(refused).To(BeTrue())
		})
	}
}
