package awsdiff

import (
	"slices"
	"testing"
)

// The differences between our pools and the AWS VPC CNI's datastore that
// remain on purpose, each with its reason: THE table. A sequence that
// meets a difference not in it fails at once (pair.differ); a difference
// of the table that the sequences no longer meet fails at the end
// (checkTable), so that the table says what is, no more, no less.
const (
	dChoice          = "choice"
	dCoolingReuse    = "cooling-reuse"
	dUnknownRelease  = "unknown-release"
	dForeignAddress  = "foreign-address"
	dReservedAddress = "reserved-address"
	dFreeableCooling = "freeable-cooling"
	dFreeableUnknown = "freeable-unknown"
	dYoungENI        = "young-eni"
	dRestoreNoVeth   = "restore-no-veth"
	dForcedTotal     = "forced-total"
)

var differences = map[string]string{
	dChoice: "which free address an assign hands out: the datastore takes the first it meets in Go map order (ENIs, then " +
		"their addresses: random); ours is next-fit, pool by pool in the order they were added, so that a released " +
		"address waits its turn. The rig leaves the datastore only our choice for the call, so both go on holding the same.",
	dCoolingReuse: "nothing free but addresses in their cooldown: the datastore refuses the assign " +
		"(ErrNoAvailableIPInDataStore); ours hands out the address whose cooldown ends first (a cooldown never fails a " +
		"CNI ADD while an address exists). The rig then ends that address's cooldown in the datastore and assigns it there too.",
	dUnknownRelease: "releasing a key that holds nothing: the datastore says ErrUnknownPod; ours succeeds with nothing " +
		"released (a CNI DEL is idempotent: the runtime repeats it).",
	dForeignAddress: "adding an address outside the pool's prefix (one of another ENI's, say): the datastore takes any " +
		"address on any ENI, even one another ENI has; ours keeps a pool's addresses inside its prefix (ipalloc." +
		"ErrOutOfRange), so an address is in one pool at most. The rig deletes it from the datastore again.",
	dReservedAddress: "adding the network address, gateway, NAT loopback or broadcast address of the pool's prefix: the " +
		"datastore takes it (an ENI's secondary address is any address of the VPC subnet); ours never hands them out " +
		"(VPP routes the pool through its gateway and masquerades through its NAT loopback): ipalloc.ErrReserved. The " +
		"rig deletes it from the datastore again.",
	dFreeableCooling: "FreeableIPs of an ENI with addresses in their cooldown: the datastore lists every unassigned address " +
		"(ipamd may give it back to EC2); ours lists those that can be handed out now, not those cooling down.",
	dFreeableUnknown: "FreeableIPs of an ENI the node does not have: the datastore returns nil; ours ErrNoSuchPool.",
	dYoungENI: "RemoveUnusedENIFromStore keeps an ENI younger than a minute (minENILifeTime: ipamd just attached it); " +
		"RemoveUnusedPool has no minimum age (a pool is a prefix, attaching it costs nothing). The rig removes it from the " +
		"datastore with RemoveENIFromDataStore.",
	dRestoreNoVeth: "restoring a checkpoint: ReadBackingStore drops an allocation whose pod has no host veth (and deletes " +
		"its IP rules); ours imports every entry of the document in its pools (an address is released only on evidence " +
		"that its pod is gone: Kubernetes, the CNI DEL, the runtime). The rig imports ours again without it.",
	dForcedTotal: "the node's address count after an ENI with assigned addresses is removed with force: " +
		"RemoveENIFromDataStore subtracts that ENI's addresses from its running total twice (in its force loop and " +
		"after it), so ENIInfos.TotalIPs falls short by that many until ipamd restarts (GetIPStats, which counts " +
		"afresh, is right); ours counts every pool's addresses when asked. A datastore bug, not followed; the rig " +
		"checks the shortfall is exactly that.",
}

// checkTable fails for every difference of the table that met does not
// count.
func checkTable(t *testing.T, met map[string]int) {
	t.Helper()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range differences {
			if !yield(k) {
				return
			}
		}
	}) {
		if met[name] == 0 {
			t.Errorf("the difference %q of the table was not met: gone? (%s)", name, differences[name])
		}
	}
}
