package nodeipamdiff

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contiv-ipam/agent/plugins/nodeipam"
)

// namedDifference is a difference between Kubernetes and ours that is on
// purpose: what differs, and why ours does what it does.
type namedDifference struct {
	key, what, why string
}

// syncDifferences are the differences between Kubernetes' NodeSync and
// our sync loops that TestSyncRandomSequences meets and sets aside: each
// step's two outcomes are normalised by them (and counted), and what is
// left must be equal. Every one must be met in a full run, or the test
// fails: a difference that disappeared must leave this table. The ones
// that make the two sides' state drift apart are not generated there;
// TestSyncDifferencesOnPurpose pins them.
var syncDifferences = []namedDifference{
	{"network-unavailable",
		"k8s sets the node condition NetworkUnavailable=False after every pod CIDR patch and cloud write; ours sets no condition",
		"on GCE an alias range is routed by the cloud once set; our Cloud is a record of ranges and the node's network is its agent's to report"},
	{"warning-every-run",
		"k8s emits its Warning again on every run while the cause lasts; ours once, and again only after a run without it",
		"a resync every 30 s would otherwise flood the Events of every node in trouble"},
	{"no-cloud-range-reason",
		"SyncFromCloud, a node with no pod CIDR and no cloud range: k8s warns CloudCIDRAllocatorInvalidMode (\"cannot allocate\"), ours CIDRNotAvailable",
		"nothing is wrong with the mode: the node waits for the cloud, as a node waits for a free block"},
	{"full-range-warning",
		"SyncFromCluster, the cluster range full: k8s returns the error without an event, ours also warns CIDRNotAvailable",
		"the operator sees why the node has no pod CIDR on the Node itself"},
	{"out-of-range-warning",
		"a range outside the cluster range: both refuse to copy it and return an error; ours also warns CIDROutOfRange",
		"the operator sees why on the Node itself (k8s only logs the Occupy error)"},
	{"conflict-warning",
		"SyncFromCloud, a cloud range another node holds: both set it; ours also warns CIDRConflict",
		"two nodes with one pod CIDR is a fault the operator must see"},
	{"delete-removes-alias",
		"SyncFromCluster, a node deleted: ours removes its cloud range, k8s leaves it (its cloud API cannot remove one)",
		"the cluster wrote it, the cluster removes it: a Node of that name that registers again gets a fresh block, where k8s refuses it for ever (TestSyncDifferencesOnPurpose)"},
}

// syncRows are the configurations of the random sequences: small ranges,
// so that SyncFromCluster runs them full.
var syncRows = []struct {
	name    string
	mode    nodeipam.SyncMode
	cluster string
	mask    int
	outside string // a block outside the cluster range
	cover   string // a range that covers the cluster range and starts before it
}{
	{"SyncFromCluster IPv4 /24 by /28", nodeipam.SyncFromCluster, "10.0.16.0/24", 28, "192.168.0.16/28", "10.0.0.0/16"},
	{"SyncFromCluster IPv6 /120 by /124", nodeipam.SyncFromCluster, "fd00::100/120", 124, "fd01::10/124", "fd00::/112"},
	{"SyncFromCloud IPv4 /24 by /28", nodeipam.SyncFromCloud, "10.0.16.0/24", 28, "192.168.0.16/28", "10.0.0.0/16"},
	{"SyncFromCloud IPv6 /120 by /124", nodeipam.SyncFromCloud, "fd00::100/120", 124, "fd01::10/124", "fd00::/112"},
}

const syncSteps = 5000

// syncOp is one step: "+n" adds node n (with cidr as its pod CIDR when
// set), "-n" deletes it (and the cloud drops its range with the
// instance), "~n" resyncs it, "@n" sets its cloud range to cidr ("":
// removes it) and resyncs it.
type syncOp struct {
	kind byte
	name string
	cidr string
	f    faults
}

func (o syncOp) String() string {
	s := string(o.kind) + o.name
	if o.kind == '+' && o.cidr != "" || o.kind == '@' {
		s += "=" + o.cidr
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{o.f.get, "get"}, {o.f.set, "set"}, {o.f.patch, "patch"}, {o.f.cond, "cond"}} {
		if f.on {
			s += " !" + f.name
		}
	}
	return s
}

// syncCompare runs ops on both sides and compares them step by step.
type syncCompare struct {
	t    testing.TB
	mode nodeipam.SyncMode
	k8s  *k8sSync
	ours *oursSync
	prev map[string][]string // node -> k8s's warnings in its last run
	hits map[string]int      // named difference -> steps it was met in
}

func newSyncCompare(t testing.TB, mode nodeipam.SyncMode, cluster string, mask int, hits map[string]int) *syncCompare {
	k, o := bothSync(t, mode, cluster, mask)
	return &syncCompare{t: t, mode: mode, k8s: k, ours: o, prev: make(map[string][]string), hits: hits}
}

// step runs op on both sides, normalises the outcomes by
// syncDifferences and fails the test on any other difference, in the
// outcome or in the node's pod CIDR and cloud range afterwards.
func (c *syncCompare) step(op syncOp) (k8s, ours outcome) {
	t := c.t
	t.Helper()
	var sides [2]outcome
	for i, s := range []syncSide{c.k8s, c.ours} {
		switch op.kind {
		case '+':
			sides[i] = s.add(t, op.name, op.cidr, op.f)
		case '~':
			sides[i] = s.resync(t, op.name, op.f)
		case '@':
			s.setAlias(t, op.name, op.cidr)
			sides[i] = s.resync(t, op.name, op.f)
		case '-':
			sides[i] = s.del(t, op.name)
			s.setAlias(t, op.name, "")
		}
	}
	k8s, ours = sides[0], sides[1]
	kn, on := c.normalise(op, k8s, ours)
	if !slices.Equal(kn.actions, on.actions) || !slices.Equal(kn.warnings, on.warnings) || (kn.err == nil) != (on.err == nil) {
		t.Fatalf("%s: an unnamed difference:\n  k8s:  actions %q warnings %q err %v\n  ours: actions %q warnings %q err %v\n"+
			"  (normalised: k8s %q %q, ours %q %q)",
			op, k8s.actions, k8s.warnings, k8s.err, ours.actions, ours.warnings, ours.err,
			kn.actions, kn.warnings, on.actions, on.warnings)
	}
	if op.kind != '-' {
		if kp, op2 := c.k8s.podCIDR(t, op.name), c.ours.podCIDR(t, op.name); kp != op2 {
			t.Fatalf("%s: pod CIDR: k8s %q, ours %q", op, kp, op2)
		}
	}
	if ka, oa := c.k8s.alias(op.name), c.ours.alias(op.name); ka != oa {
		t.Fatalf("%s: cloud range: k8s %q, ours %q", op, ka, oa)
	}
	return k8s, ours
}

// normalise removes from the outcomes what syncDifferences name.
func (c *syncCompare) normalise(op syncOp, k8s, ours outcome) (kn, on outcome) {
	hit := func(key string) { c.hits[key]++ }
	kn.err, on.err = k8s.err, ours.err
	for _, a := range k8s.actions {
		if strings.HasPrefix(a, actCond+" "+op.name+" NetworkUnavailable=false") {
			hit("network-unavailable")
			continue
		}
		kn.actions = append(kn.actions, a)
	}
	for _, a := range ours.actions {
		if op.kind == '-' && c.mode == nodeipam.SyncFromCluster && a == actAlias+" "+op.name {
			hit("delete-removes-alias")
			continue
		}
		on.actions = append(on.actions, a)
	}
	for _, w := range ours.warnings {
		switch {
		case w == nodeipam.ReasonCIDRNotAvailable && c.mode == nodeipam.SyncFromCloud:
			hit("no-cloud-range-reason")
			w = nodeipam.ReasonInvalidMode
		case w == nodeipam.ReasonCIDRNotAvailable:
			hit("full-range-warning")
			continue
		case w == nodeipam.ReasonCIDROutOfRange:
			hit("out-of-range-warning")
			continue
		case w == nodeipam.ReasonCIDRConflict:
			hit("conflict-warning")
			continue
		}
		on.warnings = append(on.warnings, w)
	}
	// A warning k8s raised in the node's last run too: ours emits it
	// once, k8s on every run.
	prev := c.prev[op.name]
	for _, w := range k8s.warnings {
		if slices.Contains(prev, w) {
			hit("warning-every-run")
			continue
		}
		kn.warnings = append(kn.warnings, w)
	}
	on.warnings = slices.DeleteFunc(on.warnings, func(w string) bool { return slices.Contains(prev, w) })
	c.prev[op.name] = k8s.warnings
	if op.kind == '-' {
		delete(c.prev, op.name)
	}
	slices.Sort(kn.warnings)
	slices.Sort(on.warnings)
	return kn, on
}

// blocksOf lists the blocks of cluster.
func blocksOf(cluster string, mask int) []string {
	p := netip.MustParsePrefix(cluster)
	n := 1 << (mask - p.Bits())
	out := make([]string, 0, n)
	a := p.Addr()
	for range n {
		out = append(out, netip.PrefixFrom(a, mask).String())
		for range 1 << (a.BitLen() - mask) {
			a = a.Next()
		}
	}
	return out
}

// blockOf returns the block of the node mask size that holds cidr's
// first address.
func blockOf(cidr string, mask int) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return ""
	}
	b, err := p.Addr().Prefix(mask)
	if err != nil {
		return ""
	}
	return b.String()
}

// half returns the first half of block b.
func half(b string) string {
	p := netip.MustParsePrefix(b)
	return netip.PrefixFrom(p.Addr(), p.Bits()+1).String()
}

// gen makes random steps that avoid what makes the two sides drift
// apart on purpose (see syncDifferences): in SyncFromCluster, no cloud
// range that is a whole block for a node without a pod CIDR, no pod CIDR
// given to a new node that another node holds, no failed cloud write or
// patch during an allocation.
type gen struct {
	rng     *rand.Rand
	mode    nodeipam.SyncMode
	blocks  []string
	mask    int
	outside string
	cover   string
	names   []string
}

func (g *gen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

// next returns the next step; present are the nodes there with their
// pod CIDRs.
func (g *gen) next(present map[string]string) syncOp {
	name := g.pick(g.names)
	fromCluster := g.mode == nodeipam.SyncFromCluster
	pod, there := present[name]
	if !there {
		op := syncOp{kind: '+', name: name}
		if g.rng.IntN(10) < 3 {
			held := make(map[string]bool)
			for _, c := range present {
				held[blockOf(c, g.mask)] = true
			}
			var free []string
			for _, b := range g.blocks {
				if !held[b] {
					free = append(free, b)
				}
			}
			switch {
			case g.rng.IntN(3) == 0 || len(free) == 0:
				op.cidr = g.outside
			case fromCluster:
				op.cidr = g.pick(free)
			default:
				op.cidr = g.pick(g.blocks)
			}
		}
		if !fromCluster && g.rng.IntN(6) == 0 {
			op.f = g.fault(false)
		}
		return op
	}
	switch r := g.rng.IntN(20); {
	case r < 5:
		return syncOp{kind: '-', name: name}
	case r < 11:
		return syncOp{kind: '~', name: name, f: g.maybeFault(pod != "")}
	}
	op := syncOp{kind: '@', name: name, f: g.maybeFault(pod != "")}
	switch r := g.rng.IntN(10); {
	case r < 2:
		op.cidr = ""
	case r < 3:
		op.cidr = g.outside
	case r < 4:
		op.cidr = g.cover
	case r < 6:
		op.cidr = half(g.pick(g.blocks))
	case pod != "" && r < 8:
		op.cidr = pod
	case pod == "" && fromCluster:
		op.cidr = half(g.pick(g.blocks))
	default:
		op.cidr = g.pick(g.blocks)
	}
	return op
}

func (g *gen) maybeFault(hasCIDR bool) faults {
	if g.rng.IntN(6) != 0 {
		return faults{}
	}
	return g.fault(hasCIDR)
}

// fault returns one fault that does not make the sides drift apart.
func (g *gen) fault(hasCIDR bool) faults {
	switch g.rng.IntN(3) {
	case 0:
		if g.mode == nodeipam.SyncFromCluster && hasCIDR {
			return faults{set: true} // the node's CIDR written to the cloud again
		}
	case 1:
		if g.mode == nodeipam.SyncFromCloud {
			return faults{patch: true}
		}
	}
	return faults{get: true}
}

var syncSeedFlag = flag.Uint64("syncseed", 0, "seed of TestSyncRandomSequences (0: the clock)")

// TestSyncRandomSequences drives Kubernetes' NodeSync and our sync loops
// with the same random node adds (with and without a pod CIDR), resyncs,
// deletes and cloud range changes, with failing cloud and API calls, mode
// by mode, and compares every step's patches, cloud writes, conditions,
// warnings and errors, and the node's pod CIDR and cloud range after it.
func TestSyncRandomSequences(t *testing.T) {
	seed := *syncSeedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -args -syncseed %d)", seed, seed)
	hits := make(map[string]int)
	total := 0
	for i, row := range syncRows {
		t.Run(row.name, func(t *testing.T) {
			c := newSyncCompare(t, row.mode, row.cluster, row.mask, hits)
			g := &gen{rng: rand.New(rand.NewPCG(seed, uint64(i))), mode: row.mode,
				blocks: blocksOf(row.cluster, row.mask), mask: row.mask, outside: row.outside, cover: row.cover}
			for j := range 20 {
				g.names = append(g.names, fmt.Sprintf("n%02d", j))
			}
			present := make(map[string]string)
			var last syncOp
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("failed at %s; seed %d", last, seed)
				}
			})
			errs := 0
			for range syncSteps {
				last = g.next(present)
				k8s, _ := c.step(last)
				total++
				if k8s.err != nil {
					errs++
				}
				if last.kind == '-' {
					delete(present, last.name)
				} else {
					present[last.name] = c.k8s.podCIDR(t, last.name)
				}
			}
			for name := range present {
				if kp, op := c.k8s.podCIDR(t, name), c.ours.podCIDR(t, name); kp != op {
					t.Errorf("node %s at the end: k8s %q, ours %q", name, kp, op)
				}
			}
			t.Logf("%d steps, %d with an error, %d nodes at the end", syncSteps, errs, len(present))
		})
	}
	t.Logf("%d steps compared; named differences met: %v", total, hits)
	if t.Failed() || strings.Contains(flag.Lookup("test.run").Value.String(), "/") {
		return
	}
	for _, d := range syncDifferences {
		if hits[d.key] == 0 {
			t.Errorf("named difference %q was not met in %d steps: is it gone? (%s)", d.key, total, d.what)
		}
	}
	for key := range hits {
		if !slices.ContainsFunc(syncDifferences, func(d namedDifference) bool { return d.key == key }) {
			t.Errorf("difference %q is counted but not in syncDifferences", key)
		}
	}
}

// TestSyncDifferencesOnPurpose pins, one subtest each, the differences
// between Kubernetes' NodeSync and ours that make the two sides' state
// drift apart (so the random sequences do not generate them), and
// asserts both sides' behaviour.
func TestSyncDifferencesOnPurpose(t *testing.T) {
	const cluster, mask = "10.0.0.0/24", 28
	cluster1 := func(t *testing.T, mode nodeipam.SyncMode) (*k8sSync, *oursSync) {
		return bothSync(t, mode, cluster, mask)
	}
	type want struct {
		actions  []string
		warnings []string
		err      bool
	}
	check := func(t *testing.T, what string, got outcome, w want) {
		t.Helper()
		if !slices.Equal(got.actions, w.actions) || !slices.Equal(got.warnings, w.warnings) || (got.err != nil) != w.err {
			t.Fatalf("%s: got actions %q warnings %q err %v; want actions %q warnings %q err %t",
				what, got.actions, got.warnings, got.err, w.actions, w.warnings, w.err)
		}
	}
	const cond = "cond n NetworkUnavailable=false"
	invalidMode := []string{nodeipam.ReasonInvalidMode}

	// Kubernetes' comment: a hard error of the cloud write leaks the
	// block until the controller restarts. Ours keeps the block for the
	// node's next try, so no block is lost.
	t.Run("SyncFromCluster, the cloud write of an allocation fails: k8s leaks the block, ours retries with it", func(t *testing.T) {
		k, o := cluster1(t, nodeipam.SyncFromCluster)
		check(t, "k8s", k.add(t, "n", "", faults{set: true}), want{actions: []string{"alias n 10.0.0.0/28 !"}, err: true})
		check(t, "ours", o.add(t, "n", "", faults{set: true}), want{actions: []string{"alias n 10.0.0.0/28 !"}, err: true})
		check(t, "k8s", k.resync(t, "n", faults{}), want{actions: []string{"alias n 10.0.0.16/28", "patch n 10.0.0.16/28", cond}})
		check(t, "ours", o.resync(t, "n", faults{}), want{actions: []string{"alias n 10.0.0.0/28", "patch n 10.0.0.0/28"}})
		check(t, "k8s", k.add(t, "m", "", faults{}), want{actions: []string{"alias m 10.0.0.32/28", "patch m 10.0.0.32/28",
			"cond m NetworkUnavailable=false"}})
		check(t, "ours", o.add(t, "m", "", faults{}), want{actions: []string{"alias m 10.0.0.16/28", "patch m 10.0.0.16/28"}})
	})

	// The cloud write landed, the patch did not: Kubernetes then finds a
	// node without a pod CIDR whose cloud range is set, which its
	// SyncFromCluster refuses for ever (InvalidMode). Ours patches the
	// range it wrote; a new leader does the same (the next subtest).
	t.Run("SyncFromCluster, the patch fails after the cloud write: k8s refuses the node for ever, ours patches it", func(t *testing.T) {
		k, o := cluster1(t, nodeipam.SyncFromCluster)
		for _, s := range []syncSide{k, o} {
			check(t, "add", s.add(t, "n", "", faults{patch: true}),
				want{actions: []string{"alias n 10.0.0.0/28", "patch n 10.0.0.0/28 !"}, err: true})
		}
		for range 2 {
			check(t, "k8s", k.resync(t, "n", faults{}), want{warnings: invalidMode, err: true})
		}
		check(t, "ours", o.resync(t, "n", faults{}), want{actions: []string{"patch n 10.0.0.0/28"}})
		if got := o.podCIDR(t, "n"); got != "10.0.0.0/28" {
			t.Fatalf("ours: node n holds %q", got)
		}
	})

	t.Run("SyncFromCluster, a node without a pod CIDR whose cloud range is a free block: k8s refuses, ours adopts it", func(t *testing.T) {
		k, o := cluster1(t, nodeipam.SyncFromCluster)
		k.setAlias(t, "n", "10.0.0.32/28")
		o.setAlias(t, "n", "10.0.0.32/28")
		check(t, "k8s", k.add(t, "n", "", faults{}), want{warnings: invalidMode, err: true})
		check(t, "ours", o.add(t, "n", "", faults{}), want{actions: []string{"patch n 10.0.0.32/28"}})
	})

	// The Node is deleted but its instance stays (a Node re-registered
	// by its kubelet): Kubernetes left its cloud range and refuses the
	// new Node for ever; ours removed it and hands out a fresh block.
	t.Run("SyncFromCluster, a node deleted and registered again: k8s left its cloud range and refuses it, ours allocates", func(t *testing.T) {
		k, o := cluster1(t, nodeipam.SyncFromCluster)
		check(t, "k8s", k.add(t, "n", "", faults{}), want{actions: []string{"alias n 10.0.0.0/28", "patch n 10.0.0.0/28", cond}})
		check(t, "ours", o.add(t, "n", "", faults{}), want{actions: []string{"alias n 10.0.0.0/28", "patch n 10.0.0.0/28"}})
		check(t, "k8s", k.del(t, "n"), want{})
		check(t, "ours", o.del(t, "n"), want{actions: []string{"alias n"}})
		if k.alias("n") != "10.0.0.0/28" || o.alias("n") != "" {
			t.Fatalf("cloud range after the delete: k8s %q, ours %q", k.alias("n"), o.alias("n"))
		}
		check(t, "k8s", k.add(t, "n", "", faults{}), want{warnings: invalidMode, err: true})
		check(t, "ours", o.add(t, "n", "", faults{}), want{actions: []string{"alias n 10.0.0.16/28", "patch n 10.0.0.16/28"}})
	})

	// Kubernetes' check of a node that has both (validateRange) compares
	// them and does not occupy the node's CIDR: a node that registers
	// with its pod CIDR and cloud range set (after a restart of the
	// controller, which occupied only the nodes it listed then) leaves
	// its block free, and the next node gets it too.
	t.Run("SyncFromCluster, a new node with pod CIDR and cloud range: k8s does not occupy it and hands it out again, ours does", func(t *testing.T) {
		k, o := cluster1(t, nodeipam.SyncFromCluster)
		for _, s := range []syncSide{k, o} {
			s.setAlias(t, "n", "10.0.0.0/28")
			check(t, "add n", s.add(t, "n", "10.0.0.0/28", faults{}), want{})
		}
		check(t, "k8s", k.add(t, "m", "", faults{}), want{actions: []string{"alias m 10.0.0.0/28", "patch m 10.0.0.0/28",
			"cond m NetworkUnavailable=false"}})
		check(t, "ours", o.add(t, "m", "", faults{}), want{actions: []string{"alias m 10.0.0.16/28", "patch m 10.0.0.16/28"}})
	})

	// The condition write failing fails Kubernetes' run after the patch;
	// the retry finds the node consistent and never sets the condition.
	t.Run("NetworkUnavailable: k8s sets it after a patch and fails the run when that fails, ours sets nothing", func(t *testing.T) {
		k, o := cluster1(t, nodeipam.SyncFromCloud)
		k.setAlias(t, "n", "10.0.0.16/28")
		o.setAlias(t, "n", "10.0.0.16/28")
		check(t, "k8s", k.add(t, "n", "", faults{cond: true}), want{actions: []string{"patch n 10.0.0.16/28", cond + " !"}, err: true})
		check(t, "ours", o.add(t, "n", "", faults{cond: true}), want{actions: []string{"patch n 10.0.0.16/28"}})
		check(t, "k8s", k.resync(t, "n", faults{}), want{})
		check(t, "ours", o.resync(t, "n", faults{}), want{})
	})

	// A pod CIDR that is not a CIDR: Kubernetes' outcome depends on the
	// case (no event and an error, InvalidMode, or Mismatch and no
	// error); ours reports the value (CloudCIDRAllocatorInvalidPodCIDR)
	// and returns an error in every case, and leaves node and cloud as
	// they are in both.
	t.Run("a pod CIDR that is not a CIDR: k8s depends on the case, ours reports InvalidPodCIDR", func(t *testing.T) {
		invalid := []string{nodeipam.ReasonInvalidPodCIDR}
		rows := []struct {
			name         string
			mode         nodeipam.SyncMode
			alias        string
			k8s, ours    want
			k8sDel, oDel want
		}{
			{"SyncFromCluster, no cloud range", nodeipam.SyncFromCluster, "", want{err: true}, want{warnings: invalid, err: true},
				want{warnings: invalid}, want{actions: []string{"alias n"}}},
			{"SyncFromCloud, no cloud range", nodeipam.SyncFromCloud, "", want{warnings: invalidMode, err: true}, want{warnings: invalid, err: true},
				want{warnings: invalid}, want{}},
			{"SyncFromCloud, a cloud range", nodeipam.SyncFromCloud, "10.0.0.16/28", want{warnings: []string{nodeipam.ReasonMismatch}},
				want{warnings: invalid, err: true}, want{warnings: invalid}, want{}},
		}
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				k, o := cluster1(t, row.mode)
				if row.alias != "" {
					k.setAlias(t, "n", row.alias)
					o.setAlias(t, "n", row.alias)
				}
				check(t, "k8s", k.add(t, "n", "not-a-cidr", faults{}), row.k8s)
				check(t, "ours", o.add(t, "n", "not-a-cidr", faults{}), row.ours)
				check(t, "k8s delete", k.del(t, "n"), row.k8sDel)
				check(t, "ours delete", o.del(t, "n"), row.oDel)
			})
		}
	})
}
