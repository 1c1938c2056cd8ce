package ciliumdiff

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

var docFlag = flag.String("doc", "", "write the section \"Differences from Cilium's IPAM\" (markdown, from the table) to this file")

// step is what a random sequence knows of one call where the two sides'
// outcomes differ.
type step struct {
	call       string // our call, as op.call names it
	tgt        string // what the address was before the call (held, free, excluded, network, gateway, natLoop, last, outside)
	excl       bool   // the address is excluded
	ownerHolds bool   // a release by owner: the owner held an address
	cilium     class
	ours       class
}

// difference is one way our Cilium-style surface differs from Cilium's
// pkg/ipam (v1.20.2), with its reason. Every one has a pin: the smallest
// scenario that shows it, asserting both sides' behaviour, which fails
// once the two sides agree. One the random sequences meet must be met
// there too: explains says which differing outcomes it accounts for (a
// difference of outcome class), or the sequence meets it by its id (a
// difference of address or result).
type difference struct {
	id       string
	call     string
	cilium   string
	ours     string
	reason   string
	explains func(s step) bool
	random   bool // the random sequences must meet it
	pin      func(t *testing.T)
}

func isAllocate(s step) bool {
	return s.call == "AllocateIP" || s.call == "AllocateIPString" || s.call == "Allocator.Allocate"
}

func isRelease(s step) bool {
	return s.call == "ReleaseIP" || s.call == "ReleaseIPString(ip)" || s.call == "Allocator.Release"
}

// differences is THE table: every difference between the two sides that
// the comparison finds, and why it is there. A differing outcome no entry
// explains fails the random sequences; an entry whose pin no longer shows
// it, or that the random sequences no longer meet, fails
// TestDifferencesTable. docs: the section rendered from it (-doc).
var differences = []difference{
	{
		id:     "reserved-addresses",
		call:   "AllocateIP of the network address, the pod gateway (host 1), the NAT loopback (the address before the last) or the last address",
		cilium: "the network and the last address: ErrNotInRange; the gateway and the address before the last are pod addresses like any other (the comparison holds both on Cilium's side, owner \"reserved\": ErrAllocated)",
		ours:   "ErrReserved for all four; AllocateNext never hands out the gateway nor the NAT loopback",
		reason: "VPP routes the pod subnet through the gateway and masquerades through the NAT loopback: a pod must never get either. Cilium's agent takes its router address itself, with AllocateIP, out of the same range. With those two held on Cilium's side both have the same free addresses.",
		explains: func(s step) bool {
			return isAllocate(s) && !s.excl && s.ours == reserved &&
				(s.cilium == outOfRange && (s.tgt == "network" || s.tgt == "last") ||
					s.cilium == taken && (s.tgt == "gateway" || s.tgt == "natLoop"))
		},
		random: true,
		pin:    pinReservedAddresses,
	},
	{
		id:     "exclusion-checked-first",
		call:   "AllocateIP of an excluded address that ours never hands out anyway (one of the four above, or outside the pod subnet)",
		cilium: "\"IP … is excluded\": the exclusions are checked first",
		ours:   "ErrReserved, or ErrOutOfRange outside the pod subnet: what the address is comes first; the exclusion changes nothing (the status line counts no exclusion for it)",
		reason: "Both refuse; ours names the reason that holds whatever the exclusions are.",
		explains: func(s step) bool {
			return isAllocate(s) && s.excl && s.cilium == excluded &&
				(s.ours == reserved && slices.Contains([]string{"network", "gateway", "natLoop", "last"}, s.tgt) ||
					s.ours == outOfRange && s.tgt == "outside")
		},
		random: true,
		pin:    pinExclusionCheckedFirst,
	},
	{
		id:     "next-fit",
		call:   "AllocateNext, AllocateNextWithExpiration, AllocateNextFamily, Allocator.AllocateNext",
		cilium: "a free address picked at random (the random scan of NewCIDRRange's bitmap)",
		ours:   "next-fit: the first free address after the last one handed out, wrapping around",
		reason: "Deterministic, and a released address waits a whole round before it is handed out again: a crash-looping pod does not get its predecessor's address, which peers may still route to (Kubernetes' cidrset does the same). The comparison then gives Cilium's side our address instead (ReleaseIP, AllocateIP and, for a call with expiration, StartExpirationTimer), so that both go on holding the same addresses.",
		random: true,
		pin:    pinNextFit,
	},
	{
		id:     "release-unheld",
		call:   "ReleaseIP (Allocator.Release, ReleaseIPString of an address) of an address no allocation holds: free, released already, excluded, the network or last address, outside the pod subnet",
		cilium: "nil (Range.Release of an address it does not hold does nothing)",
		ours:   "ErrNotAllocated",
		reason: "A caller that releases the wrong address hears of it; neither side changes anything.",
		explains: func(s step) bool {
			return isRelease(s) && s.tgt != "held" && s.ours == notAllocated && s.cilium == ok
		},
		random: true,
		pin:    pinReleaseUnheld,
	},
	{
		id:     "release-owner-nothing",
		call:   "ReleaseIPString(owner) of an owner that holds nothing",
		cilium: "v1.20.2 has no release by owner (the seed API's ReleaseIPString is gone; its callers release by address): the comparison releases every address Dump lists for the owner, which for none is nil",
		ours:   "ErrNotAllocated (an owner that holds addresses: both release all of them)",
		reason: "As for a release by address: a caller that names the wrong owner hears of it.",
		explains: func(s step) bool {
			return s.call == "ReleaseIPString(owner)" && !s.ownerHolds && s.ours == notAllocated && s.cilium == ok
		},
		random: true,
		pin:    pinReleaseOwnerNothing,
	},
	{
		id:     "refused-result",
		call:   "AllocateNext(\"\") refused because the IPv4 subnet is exhausted",
		cilium: "returns the error and the IPv6 result it took first and released again",
		ours:   "returns the error and no result",
		reason: "A refused call hands out nothing; a result there reads like an address the caller holds.",
		random: true,
		pin:    pinRefusedResult,
	},
	{
		id:     "excluded-in-dump",
		call:   "AllocateNext when the next free address is excluded (ExcludeIP, called BlacklistIP in the seed API)",
		cilium: "takes it and keeps it allocated to \"<owner> (excluded)\", so that Dump lists it; ReleaseIP frees it and a later AllocateNext takes it again",
		ours:   "takes a free address out of the pool when it is excluded: Dump lists allocations only, the status line counts exclusions",
		reason: "An exclusion is nobody's allocation. Both hand out the same addresses and never an excluded one; an allocation whose address is excluded later is kept by both.",
		random: true,
		pin:    pinExcludedInDump,
	},
	{
		id:     "timer-on-unheld",
		call:   "StartExpirationTimer on an address no allocation holds: free, excluded, reserved, outside the pod subnet",
		cilium: "starts a timer (nil and a UUID), keyed by the address alone",
		ours:   "ErrNotAllocated",
		reason: "Cilium's timer outlives nothing it belongs to: when it fires it releases whatever allocation holds the address by then, one made later by another owner who asked for no timer, and while it runs an AllocateNextWithExpiration that picks the address fails. Ours refuses, so that a caller who times the wrong address hears of it. (The comparison stops Cilium's timer at once, so that both sides go on alike.)",
		explains: func(s step) bool {
			return s.call == "StartExpirationTimer" && s.tgt != "held" && s.ours == notAllocated && s.cilium == ok
		},
		random: true,
		pin:    pinTimerOnUnheld,
	},
	{
		id:     "stop-on-unheld",
		call:   "StopExpirationTimer of an address no allocation holds",
		cilium: "\"no expiration timer registered\"",
		ours:   "ErrNotAllocated",
		reason: "Both refuse; ours says that the address is not allocated at all. (On an allocation without a timer, or with another UUID, both refuse alike: ErrReservationMismatch in ours.)",
		explains: func(s step) bool {
			return s.call == "StopExpirationTimer" && s.tgt != "held" && s.ours == notAllocated && s.cilium == timerMismatch
		},
		random: true,
		pin:    pinStopOnUnheld,
	},
	{
		id:     "result-fields",
		call:   "the AllocationResult of every allocation",
		cilium: "IP and IPPoolName only, in cluster-pool mode (CIDRs, GatewayIP and PrimaryMAC are for the cloud modes)",
		ours:   "IP, CIDRs (the pod subnet) and GatewayIP (the pod gateway)",
		reason: "A pod's CNI result needs its gateway, which is VPP's address on the node, not a router address the caller allocates.",
		random: true,
		pin:    pinResultFields,
	},
	{
		id:     "pools",
		call:   "every call",
		cilium: "takes an IPAM pool name (the default pool in cluster-pool mode) and returns it in AllocationResult.IPPoolName",
		ours:   "the seed API's signatures: no pool argument, one pod subnet per family",
		reason: "The node's pod subnets come from contiv.conf and the node ID; the pool of an address is its subnet.",
		pin:    pinPools,
	},
	{
		id:     "missing-family",
		call:   "AllocateNext(\"ipv6\") and AllocateNextFamily(IPv6) on a node without IPv6 (or IPv4 without IPv4), AllocateNext of a family that does not exist",
		cilium: "AllocateNext: no address and no error; AllocateNextFamily panics (in cluster-pool mode it reads the missing allocator's capacity for a metric before it checks that there is one)",
		ours:   "ErrIPv6Disabled (ErrIPv4Disabled), or an error naming the families",
		reason: "A caller that asks for a family gets an address of it or an error, never neither. (AllocateIP of an address of the missing family: ErrIPv6Disabled in both.)",
		pin:    pinMissingFamily,
	},
	{
		id:     "owner-names",
		call:   "any allocation with an owner that is empty, longer than 256 bytes, not printable UTF-8, or an IP address",
		cilium: "accepts any string",
		ours:   "refuses it: \"owner name … is empty\" (… is an IP address, …)",
		reason: "ReleaseIPString must be able to name every owner: an empty one cannot be named, and one that reads as an address would be released by address.",
		pin:    pinOwnerNames,
	},
	{
		id:     "non-positive-timeout",
		call:   "StartExpirationTimer with a timeout of 0 or less; AllocateNextWithExpiration with a negative one",
		cilium: "a timer that fires at once: the address is released as soon as it is handed out",
		ours:   "refused: \"want a positive duration\" (AllocateNextWithExpiration with 0 has no timer, as in Cilium)",
		reason: "A timer that has run out before the call returns is a release; a caller that means one calls ReleaseIP.",
		pin:    pinNonPositiveTimeout,
	},
	{
		id:     "ipv6-range-cap",
		call:   "an IPv6 pod subnet of more than 2^16 addresses (a /64)",
		cilium: "its Range covers the first 65536 addresses only (ipallocator.RangeSize: one big.Int bit per address)",
		ours:   "hands out the whole subnet (64-bit offsets, a sparse bitmap)",
		reason: "A /64 per node is the usual IPv6 pod subnet.",
		pin:    pinIPv6RangeCap,
	},
	{
		id:     "cooldown",
		call:   "AllocateNext after a release, with addressCooldown on (30s, the default)",
		cilium: "hands out a released address again at once",
		ours:   "keeps a released address out of next-fit for addressCooldown (the AWS datastore's cooldown): while another address is free it is not handed out, and with none free the one whose cooldown ends first is; the comparison runs with addressCooldown 0",
		reason: "Peers may still route to a released address for a while: a new pod should not get it meanwhile.",
		pin:    pinCooldown,
	},
}

// diffByID is the entry of differences with id; it panics on a typo.
func diffByID(id string) *difference {
	for i := range differences {
		if differences[i].id == id {
			return &differences[i]
		}
	}
	panic("no difference " + id)
}

// explain is the entry of differences that explains s, "" when none does.
func explain(s step) string {
	for _, d := range differences {
		if d.explains != nil && d.explains(s) {
			return d.id
		}
	}
	return ""
}

// tally counts the differences and agreements the random sequences met;
// sequences running in parallel share it.
type tally struct {
	mu     sync.Mutex
	seqs   int // sequences run
	met    map[string]int
	agreed map[string]int
	ops    map[string]int
}

func newTally() *tally {
	return &tally{met: map[string]int{}, agreed: map[string]int{}, ops: map[string]int{}}
}

func (t *tally) add(from *tally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seqs++
	for k, n := range from.met {
		t.met[k] += n
	}
	for k, n := range from.agreed {
		t.agreed[k] += n
	}
	for k, n := range from.ops {
		t.ops[k] += n
	}
}

// TestDifferencesTable pins every difference of the table with its
// smallest scenario, runs the random sequences (every differing outcome
// must be one of the table's), and then checks that the sequences met
// every difference the table says they meet.
func TestDifferencesTable(t *testing.T) {
	for _, d := range differences {
		t.Run("pin/"+d.id, d.pin)
	}
	all := newTally()
	t.Run("random", func(t *testing.T) { runSequences(t, all) })
	if t.Failed() {
		return
	}
	if all.seqs >= 20 { // all of them ran
		for _, d := range differences {
			if d.random && all.met[d.id] == 0 {
				t.Errorf("difference %q: the random sequences no longer meet it", d.id)
			}
		}
	}
	if *docFlag != "" {
		if err := os.WriteFile(*docFlag, []byte(renderDoc()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// renderDoc is the documentation section of the table.
func renderDoc() string {
	var b strings.Builder
	b.WriteString(docIntro)
	b.WriteString("\n| | Call | Cilium v1.20.2 | Ours | Why |\n| --- | --- | --- | --- | --- |\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	for i, d := range differences {
		fmt.Fprintf(&b, "| %d. `%s` | %s | %s | %s | %s |\n", i+1, d.id, cell(d.call), cell(d.cilium), cell(d.ours), cell(d.reason))
	}
	b.WriteString(docOutro)
	return b.String()
}

// docIntro and docOutro frame the table in the documentation section.
const docIntro = `## Differences from Cilium's IPAM

The agent's Cilium-style allocation surface (AllocateNext,
AllocateNextWithExpiration, AllocateNextFamily, AllocateIP,
AllocateIPString, ReleaseIP, ReleaseIPString, BlacklistIP,
StartExpirationTimer, StopExpirationTimer, Dump and the per-family
Allocators) follows Cilium's agent IPAM. The differential test in
tests/ciliumdiff runs the same random sequences of calls through it and
through Cilium's own pkg/ipam.IPAM (v1.20.2, cluster-pool mode, built
with NewIPAM as Cilium's tests build it), on the same dual-stack node,
with the expiration timers of both on one fake clock. After every call it
compares the outcome of both sides, class by class (ok, exhausted,
taken, out of range, reserved, excluded, not allocated, family
disabled, timer exists, no such timer), and the addresses both hold with
their owners. Every outcome that differs must be one of the table below,
which the test holds as data: an outcome no entry explains fails the
test, and so does an entry that no longer differs (each has a scenario
that asserts both sides' behaviour, and the entries the sequences meet
must be met). This section is rendered from that table.

Where both agree: AllocateNext("") gives one address of each family or
none; each address is an allocation of its own, with its own expiration
timer (its own UUID in AllocationResult.ExpirationUUID), which
StopExpirationTimer stops with that UUID only, StartExpirationTimer
refuses to double, ReleaseIP stops, and which releases that address alone
when it fires; ReleaseIP releases one address; an excluded address is
never handed out and refused by AllocateIP; an allocation whose address
is excluded later is kept. (The operator's REST reserve, which Cilium
does not have, still makes one allocation of every family asked for,
under one expiration UUID that confirms it all.)
`

const docOutro = `
Not compared: the status line of Dump (its wording differs), Cilium's
IPAM pools and multi-pool, CRD, ENI and Azure modes, a per-family
Allocator given an address of the other family (Cilium v1.20.2 has no
per-family allocator outside its IPAM), ReserveLocalRoutes, and the
restore of allocations at a restart (ours keeps allocations and timer
deadlines in its store; Cilium's agent restores them from its endpoints).
`
