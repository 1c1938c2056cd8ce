package awsdiff

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

var (
	seqs  = flag.Int("seqs", 60, "random sequences of TestRandomSequencesAgree")
	steps = flag.Int("steps", 120, "calls per random sequence")
)

// The ENIs of the sequences: AWS ENI eni-i is our pool prefixes[i]. Each
// /29 has four addresses ours hands out (.2 to .5); .0, .1, .6 and .7
// are its network address, gateway, NAT loopback and broadcast.
var prefixes = []netip.Prefix{
	netip.MustParsePrefix("10.0.10.0/29"),
	netip.MustParsePrefix("10.0.11.0/29"),
	netip.MustParsePrefix("10.0.12.0/29"),
}

func eniID(i int) string { return fmt.Sprintf("eni-%d", i) }

// indexOf is the ENI of a pool prefix.
func indexOf(p netip.Prefix) int { return slices.Index(prefixes, p) }

// window is the four addresses of pool i that ours hands out.
func window(i int) []netip.Addr {
	b := prefixes[i].Addr().As4()
	var out []netip.Addr
	for h := byte(2); h <= 5; h++ {
		b[3] = h
		out = append(out, netip.AddrFrom4(b))
	}
	return out
}

// reservedOf is the four addresses of pool i that ours never hands out.
func reservedOf(i int) []netip.Addr {
	b := prefixes[i].Addr().As4()
	var out []netip.Addr
	for _, h := range []byte{0, 1, 6, 7} {
		b[3] = h
		out = append(out, netip.AddrFrom4(b))
	}
	return out
}

// keyOf is the CNI key of container c on interface ifName.
func keyOf(c int, ifName string) podmanager.AttachmentKey {
	return podmanager.AttachmentKey{Network: "aws-cni", ContainerID: fmt.Sprintf("c%d", c), IfName: ifName}
}

func awsKey(k podmanager.AttachmentKey) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: k.Network, ContainerID: k.ContainerID, IfName: k.IfName}
}

func awsMeta(k podmanager.AttachmentKey) datastore.IPAMMetadata {
	p := podOf(k)
	return datastore.IPAMMetadata{K8SPodNamespace: p.Namespace, K8SPodName: p.Name}
}

// pair runs ours and the AWS datastore in step.
type pair struct {
	t      testing.TB
	clk    *fakeClock
	o      *ours
	a      *aws
	onBolt bool
	// order lists our pools in the order they were added (our next-fit
	// tries them in that order; a restore adds them again in it).
	order []netip.Prefix
	met   map[string]int
	trail []string // the calls so far, for failure messages
	// drift is what the datastore's own total (ENIInfos.TotalIPs) lacks
	// (dForcedTotal).
	drift int
}

func newPair(t testing.TB, onBolt bool) *pair { return newPairWith(t, onBolt, nil) }

// newPairWith is newPair with the datastore over cp (nil: in memory).
func newPairWith(t testing.TB, onBolt bool, cp datastore.Checkpointer) *pair {
	clk := newFakeClock()
	return &pair{t: t, clk: clk, o: newOurs(t, clk, onBolt), a: newAWS(t, cp), onBolt: onBolt, met: map[string]int{}}
}

// failf fails the test with the calls so far.
func (p *pair) failf(format string, args ...any) {
	p.t.Helper()
	trail := p.trail
	if len(trail) > 30 {
		trail = trail[len(trail)-30:]
	}
	p.t.Fatalf("%s\nlast calls:\n  %s", fmt.Sprintf(format, args...), strings.Join(trail, "\n  "))
}

// note records a call.
func (p *pair) note(format string, args ...any) {
	p.trail = append(p.trail, fmt.Sprintf(format, args...))
}

// differ records a difference of the table; one not in it fails.
func (p *pair) differ(name string) {
	p.t.Helper()
	if _, ok := differences[name]; !ok {
		p.failf("a difference not in the table: %s", name)
	}
	p.met[name]++
}

// --- the calls --------------------------------------------------------------

func (p *pair) addENI(i int) {
	p.note("AddENI(%s) / AddEmptyPool(%s)", eniID(i), prefixes[i])
	aerr := p.a.ds.AddENI(eniID(i), i+1, false, false, false, 0, "")
	oerr := p.o.k.AddEmptyPool(prefixes[i])
	switch {
	case aerr == nil && oerr == nil:
		p.order = append(p.order, prefixes[i])
	case aerr != nil && aerr.Error() == datastore.DuplicatedENIError && errors.Is(oerr, keeper.ErrDuplicatePool):
	default:
		p.failf("add ENI %d: AWS %v, ours %v", i, aerr, oerr)
	}
}

func (p *pair) removeENI(i int, force bool) {
	p.note("RemoveENIFromDataStore(%s, %v) / RemovePool(%s, %v)", eniID(i), force, prefixes[i], force)
	before := p.awsAllocated()
	listed, _, _ := p.a.ds.GetENICIDRs(eniID(i))
	aerr := p.a.ds.RemoveENIFromDataStore(eniID(i), force)
	released, oerr := p.o.k.RemovePool(prefixes[i], force)
	switch {
	case aerr == nil && oerr == nil:
		p.order = slices.DeleteFunc(p.order, func(q netip.Prefix) bool { return q == prefixes[i] })
		want := 0
		for a := range before {
			if prefixes[i].Contains(a) {
				want++
			}
		}
		if len(released) != want {
			p.failf("remove ENI %d with force: AWS unassigned %d addresses, ours released %v", i, want, released)
		}
		if want > 0 {
			p.drift += len(listed)
			p.differ(dForcedTotal)
		}
	case aerr != nil && aerr.Error() == datastore.UnknownENIError && errors.Is(oerr, keeper.ErrNoSuchPool):
	case aerr != nil && aerr.Error() == datastore.ENIInUseError && errors.Is(oerr, keeper.ErrPoolInUse):
	default:
		p.failf("remove ENI %d (force %v): AWS %v, ours %v", i, force, aerr, oerr)
	}
}

func (p *pair) addAddr(i int, a netip.Addr) {
	p.note("AddIPv4CidrToStore(%s, %s/32) / AddPoolAddress(%s, %s)", eniID(i), a, prefixes[i], a)
	aerr := p.a.ds.AddIPv4CidrToStore(eniID(i), host(a), false)
	oerr := p.o.k.AddPoolAddress(prefixes[i], a)
	undo := func(name string) {
		p.differ(name)
		if err := p.a.ds.DelIPv4CidrFromStore(eniID(i), host(a), false); err != nil {
			p.failf("undoing AWS's add of %s to %s: %v", a, eniID(i), err)
		}
	}
	switch {
	case aerr == nil && oerr == nil:
	case aerr != nil && strings.Contains(aerr.Error(), "unknown ENI") && errors.Is(oerr, keeper.ErrNoSuchPool):
	case aerr != nil && aerr.Error() == datastore.IPAlreadyInStoreError && errors.Is(oerr, keeper.ErrAddressInPool):
	case aerr == nil && errors.Is(oerr, ipalloc.ErrOutOfRange):
		undo(dForeignAddress)
	case aerr == nil && errors.Is(oerr, ipalloc.ErrReserved):
		undo(dReservedAddress)
	default:
		p.failf("add %s to ENI %d: AWS %v, ours %v", a, i, aerr, oerr)
	}
}

func (p *pair) delAddr(i int, a netip.Addr, force bool) {
	p.note("DelIPv4CidrFromStore(%s, %s/32, %v) / DelPoolAddress(%s, %s, %v)", eniID(i), a, force, prefixes[i], a, force)
	_, wasAssigned := p.awsAllocated()[a]
	aerr := p.a.ds.DelIPv4CidrFromStore(eniID(i), host(a), force)
	released, oerr := p.o.k.DelPoolAddress(prefixes[i], a, force)
	switch {
	case aerr == nil && oerr == nil:
		if (len(released) == 1) != (wasAssigned && force) {
			p.failf("delete %s from ENI %d (force %v): AWS had it assigned: %v; ours released %v", a, i, force, wasAssigned, released)
		}
	case aerr != nil && aerr.Error() == datastore.UnknownENIError && errors.Is(oerr, keeper.ErrNoSuchPool):
	case aerr != nil && aerr.Error() == datastore.UnknownIPError &&
		(errors.Is(oerr, keeper.ErrAddressNotInPool) || errors.Is(oerr, ipalloc.ErrOutOfRange) || errors.Is(oerr, ipalloc.ErrReserved)):
	case aerr != nil && aerr.Error() == datastore.IPInUseError && errors.Is(oerr, keeper.ErrAddressInUse):
	default:
		p.failf("delete %s from ENI %d (force %v): AWS %v, ours %v", a, i, force, aerr, oerr)
	}
}

func (p *pair) assign(key podmanager.AttachmentKey) {
	p.note("AssignPodIPv4Address(%s) / allocate", key)
	held, had := p.awsHolder(key)
	eligible := p.a.eligible()
	oa, oerr := p.o.assign(key)
	if oerr != nil {
		aa, _, _, aerr := p.a.ds.AssignPodIPv4Address(awsKey(key), awsMeta(key))
		if !errors.Is(oerr, ipalloc.ErrPoolExhausted) || !errors.Is(aerr, datastore.ErrNoAvailableIPInDataStore) {
			p.failf("assign %s: AWS %q %v, ours %v", key, aa, aerr, oerr)
		}
		return
	}
	if had {
		aa, _, _, aerr := p.a.ds.AssignPodIPv4Address(awsKey(key), awsMeta(key))
		if aerr != nil || aa != held.String() || oa != held {
			p.failf("assign %s again: AWS %q %v, ours %s, held %s", key, aa, aerr, oa, held)
		}
		return
	}
	switch {
	case slices.Contains(eligible, oa):
		if len(eligible) > 1 {
			p.differ(dChoice)
		}
	case len(eligible) == 0 && slices.Contains(p.a.cooling(""), oa):
		// Nothing free: ours hands out the address whose cooldown ends
		// first, the datastore refuses.
		aa, _, _, aerr := p.a.ds.AssignPodIPv4Address(awsKey(key), awsMeta(key))
		if !errors.Is(aerr, datastore.ErrNoAvailableIPInDataStore) {
			p.failf("assign %s with every address cooling down: AWS %q %v, ours %s", key, aa, aerr, oa)
		}
		p.differ(dCoolingReuse)
	default:
		p.failf("assign %s: ours handed out %s, which the datastore cannot hand out (it can: %v)", key, oa, eligible)
	}
	undo := p.a.only(oa)
	aa, _, _, aerr := p.a.ds.AssignPodIPv4Address(awsKey(key), awsMeta(key))
	undo()
	if aerr != nil || aa != oa.String() {
		p.failf("assign %s: ours %s; AWS, left only that address, %q %v", key, oa, aa, aerr)
	}
}

func (p *pair) unassign(key podmanager.AttachmentKey) {
	p.note("UnassignPodIPAddress(%s) / release", key)
	oa, held, oerr := p.o.unassign(key)
	aa, aerr := p.a.awsUnassign(key)
	switch {
	case oerr != nil:
		p.failf("release %s: ours %v", key, oerr)
	case !held && errors.Is(aerr, datastore.ErrUnknownPod):
		p.differ(dUnknownRelease)
	case held && aerr == nil && aa == oa.String():
	default:
		p.failf("release %s: AWS %q %v, ours %s (held %v)", key, aa, aerr, oa, held)
	}
}

// advance moves both clocks by d and waits for our sweep to end the
// cooldowns that are over. The datastore also ages in real time between
// calls (it reads time.Now()): steps of 10 s keep the end of every
// cooldown (30 s) and of every ENI's minimum life (60 s) at least 10 s of
// real time away from a look before it, and one that ends exactly at a
// step is over on both sides (ours at its end; the datastore's
// time.Since is past it by the real time elapsed).
func (p *pair) advance(d time.Duration) {
	p.note("advance %s", d)
	p.clk.Advance(d)
	p.a.age(d)
	want := len(p.a.cooling(""))
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, cooling, err := p.o.added()
		if err != nil {
			p.failf("stats: %v", err)
		}
		if cooling == want {
			return
		}
		if time.Now().After(deadline) {
			p.failf("after %s: %d addresses cool down in ours, %d in the datastore", d, cooling, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func (p *pair) freeable(i int) {
	p.note("FreeableIPs(%s)", eniID(i))
	anets := p.a.ds.FreeableIPs(eniID(i))
	ofree, oerr := p.o.k.FreeableIPs(prefixes[i])
	if errors.Is(oerr, keeper.ErrNoSuchPool) {
		if anets != nil {
			p.failf("FreeableIPs of unknown ENI %d: AWS %v", i, anets)
		}
		p.differ(dFreeableUnknown)
		return
	}
	if oerr != nil {
		p.failf("FreeableIPs(%s): %v", prefixes[i], oerr)
	}
	var aset []netip.Addr
	for _, n := range anets {
		a, _ := netip.AddrFromSlice(n.IP.To4())
		aset = append(aset, a)
	}
	slices.SortFunc(aset, netip.Addr.Compare)
	cooling := p.a.cooling(eniID(i))
	want := slices.Concat(ofree, cooling)
	slices.SortFunc(want, netip.Addr.Compare)
	if !slices.Equal(aset, want) {
		p.failf("FreeableIPs of ENI %d: AWS %v; ours %v, cooling %v", i, aset, ofree, cooling)
	}
	if len(cooling) > 0 {
		p.differ(dFreeableCooling)
	}
}

func (p *pair) removeUnused(warm, minimum int) {
	p.note("RemoveUnusedENIFromStore(%d, %d, 0) / RemoveUnusedPool", warm, minimum)
	removed, err := p.o.k.RemoveUnusedPool(warm, minimum)
	if err != nil {
		p.failf("RemoveUnusedPool: %v", err)
	}
	if !removed.IsValid() {
		if got := p.a.ds.RemoveUnusedENIFromStore(warm, minimum, 0); got != "" {
			p.failf("remove unused (%d, %d): ours none, AWS %s", warm, minimum, got)
		}
		return
	}
	id := eniID(indexOf(removed))
	p.order = slices.DeleteFunc(p.order, func(q netip.Prefix) bool { return q == removed })
	young := time.Since(*inner(p.a.enis()[id], "createTime").Addr().Interface().(*time.Time)) < time.Minute
	undo := p.a.setYoung(id)
	got := p.a.ds.RemoveUnusedENIFromStore(warm, minimum, 0)
	undo()
	switch {
	case got == id:
	case got == "" && young:
		p.differ(dYoungENI)
		if err := p.a.ds.RemoveENIFromDataStore(id, false); err != nil {
			p.failf("removing young %s from the datastore: %v", id, err)
		}
	default:
		p.failf("remove unused (%d, %d): ours %s (%s), AWS %q", warm, minimum, removed, id, got)
	}
}

// --- state ------------------------------------------------------------------

// awsAllocated is the datastore's allocations: address -> CNI key.
func (p *pair) awsAllocated() map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, info := range p.a.ds.AllocatedIPs() {
		out[netip.MustParseAddr(info.IP)] = info.IPAMKey.String()
	}
	return out
}

// awsHolder is the address the datastore gave key, if any.
func (p *pair) awsHolder(key podmanager.AttachmentKey) (netip.Addr, bool) {
	for a, k := range p.awsAllocated() {
		if k == key.String() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// check compares what both hold: the ENIs and pools, the addresses of
// each, the allocations, and the counts.
func (p *pair) check() {
	p.t.Helper()
	infos := p.a.ds.GetENIInfos()
	awsENIs := slices.Sorted(maps.Keys(infos.ENIs))
	var ourENIs []string
	ns, err := p.o.k.Stats()
	if err != nil {
		p.failf("Stats: %v", err)
	}
	for _, s := range ns.Pools {
		if s.CIDR != nodeSubnet.String() {
			ourENIs = append(ourENIs, eniID(indexOf(netip.MustParsePrefix(s.CIDR))))
		}
	}
	slices.Sort(ourENIs)
	if !slices.Equal(awsENIs, ourENIs) {
		p.failf("ENIs: AWS %v, ours %v", awsENIs, ourENIs)
	}
	for _, id := range awsENIs {
		i := int(id[len(id)-1] - '0')
		ips, _, err := p.a.ds.GetENICIDRs(id)
		if err != nil {
			p.failf("GetENICIDRs(%s): %v", id, err)
		}
		var aset []netip.Addr
		for _, s := range ips {
			aset = append(aset, netip.MustParseAddr(s))
		}
		slices.SortFunc(aset, netip.Addr.Compare)
		oset, err := p.o.k.PoolAddresses(prefixes[i])
		if err != nil {
			p.failf("PoolAddresses(%s): %v", prefixes[i], err)
		}
		if !slices.Equal(aset, oset) {
			p.failf("addresses of %s: AWS %v, ours %v", id, aset, oset)
		}
	}
	aalloc := p.awsAllocated()
	oinfos, err := p.o.k.AllocatedIPs()
	if err != nil {
		p.failf("AllocatedIPs: %v", err)
	}
	oalloc := map[netip.Addr]string{}
	for _, info := range oinfos {
		oalloc[info.IP] = strings.TrimPrefix(info.Key, "attachment ")
	}
	if !maps.Equal(aalloc, oalloc) {
		p.failf("allocations: AWS %v, ours %v", aalloc, oalloc)
	}
	if infos.TotalIPs != total0(p)-p.drift || infos.AssignedIPs != len(aalloc) {
		p.failf("ENIInfos: AWS total %d, assigned %d; ours total %d (less %d), assigned %d", infos.TotalIPs, infos.AssignedIPs,
			total0(p), p.drift, len(oalloc))
	}
	st := p.a.ds.GetIPStats("4")
	total, assigned, cooling, err := p.o.added()
	if err != nil {
		p.failf("Stats: %v", err)
	}
	if st.TotalIPs != total || st.AssignedIPs != assigned || st.CooldownIPs != cooling {
		p.failf("stats: AWS %s; ours total %d, assigned %d, cooling %d", st, total, assigned, cooling)
	}
}

// total0 is the number of addresses in our added pools.
func total0(p *pair) int {
	total, _, _, err := p.o.added()
	if err != nil {
		p.failf("Stats: %v", err)
	}
	return total
}

// --- checkpoint and restore ---------------------------------------------------

// awsDocument is the checkpoint the datastore last wrote, as JSON.
func (p *pair) awsDocument() []byte {
	tc, ok := p.a.cp.(*datastore.TestCheckpoint)
	if !ok {
		p.failf("the datastore's checkpointer is a %T", p.a.cp)
	}
	b, err := json.Marshal(tc.Data)
	if err != nil {
		p.failf("the datastore's checkpoint: %v", err)
	}
	return b
}

// restore checkpoints both sides and restores each on a new instance
// with the same ENIs and addresses: the datastore from its checkpointer
// (ReadBackingStore, after AddENI and AddIPv4CidrToStore as ipamd does at
// start), ours by ImportCheckpoint of its export into a keeper on a new
// bolt file, after AddEmptyPool and AddPoolAddress. The pod of gone, if
// any, has no host veth: the datastore drops its allocation, ours keeps
// it (the rig then imports ours again without it).
func (p *pair) restore(gone podmanager.AttachmentKey) {
	p.note("checkpoint and restore (no veth for %q)", gone.ContainerID)
	// Both documents say the same, and ours reads the datastore's.
	awsData, err := checkpoint.DecodeAWS(p.awsDocument(), time.Now())
	if err != nil {
		p.failf("DecodeAWS of the datastore's own checkpoint: %v\n%s", err, p.awsDocument())
	}
	ourData, err := p.o.k.ExportCheckpoint()
	if err != nil {
		p.failf("ExportCheckpoint: %v", err)
	}
	var mem checkpoint.Memory
	if err := mem.Checkpoint(ourData); err != nil {
		p.failf("checkpoint in memory: %v", err)
	}
	if a, o := entriesOf(awsData), entriesOf(ourData); !maps.Equal(a, o) {
		p.failf("checkpoints: AWS %v, ours %v", a, o)
	}

	// The new instances, with the ENIs and addresses of the old.
	listed := map[string][]string{}
	for _, q := range p.order {
		id := eniID(indexOf(q))
		ips, _, err := p.a.ds.GetENICIDRs(id)
		if err != nil {
			p.failf("GetENICIDRs(%s): %v", id, err)
		}
		listed[id] = ips
	}
	a2 := newAWS(p.t, p.a.cp)
	o2 := newOurs(p.t, p.clk, true)
	for _, q := range p.order {
		id := eniID(indexOf(q))
		if err := a2.ds.AddENI(id, indexOf(q)+1, false, false, false, 0, ""); err != nil {
			p.failf("restore: AddENI(%s): %v", id, err)
		}
		if err := o2.k.AddEmptyPool(q); err != nil {
			p.failf("restore: AddEmptyPool(%s): %v", q, err)
		}
		for _, s := range listed[id] {
			a := netip.MustParseAddr(s)
			if err := a2.ds.AddIPv4CidrToStore(id, host(a), false); err != nil {
				p.failf("restore: AddIPv4CidrToStore(%s, %s): %v", id, s, err)
			}
			if err := o2.k.AddPoolAddress(q, a); err != nil {
				p.failf("restore: AddPoolAddress(%s, %s): %v", q, s, err)
			}
		}
	}
	// The pod of gone has no veth: every allocation of it goes.
	gonePod := ""
	if gone.ContainerID != "" {
		gonePod = podOf(gone).Namespace + "/" + podOf(gone).Name
	}
	goneEntries := 0
	for _, e := range ourData.Allocations {
		pod := e.Pod.Namespace + "/" + e.Pod.Name
		a2.links.veths[pod] = pod != gonePod
		if pod == gonePod {
			goneEntries++
		}
	}
	if err := a2.ds.ReadBackingStore(false); err != nil {
		p.failf("ReadBackingStore: %v", err)
	}
	var restored checkpoint.Data
	if err := mem.Restore(&restored); err != nil {
		p.failf("restore from memory: %v", err)
	}
	res, err := o2.k.ImportCheckpoint(restored, false)
	if err != nil || res.Skipped != 0 || res.Imported != len(ourData.Allocations) {
		p.failf("ImportCheckpoint: %+v %v", res, err)
	}
	if a2.links.rulesAsked != 2*goneEntries {
		p.failf("ReadBackingStore asked to delete %d rules for %d stale allocations, want two each", a2.links.rulesAsked, goneEntries)
	}
	if goneEntries > 0 {
		// The datastore dropped the allocations of the pod whose veth is
		// gone; ours imported them.
		for _, info := range a2.ds.AllocatedIPs() {
			if info.IPAMKey.ContainerID == gone.ContainerID {
				p.failf("the datastore restored %s, whose pod's veth is gone", info.IPAMKey)
			}
		}
		p.differ(dRestoreNoVeth)
		restored.Allocations = slices.DeleteFunc(restored.Allocations, func(e checkpoint.Entry) bool {
			return e.Pod.Namespace+"/"+e.Pod.Name == gonePod
		})
		if _, err := o2.k.ImportCheckpoint(restored, true); err != nil {
			p.failf("ImportCheckpoint again without %s: %v", gonePod, err)
		}
	}
	p.a, p.o, p.onBolt, p.drift = a2, o2, true, 0
	p.check()
	if c := p.a.cooling(""); len(c) != 0 {
		p.failf("the restored datastore has cooling addresses %v", c)
	}
}

// entriesOf is the allocations of a checkpoint: CNI key -> address, pod.
func entriesOf(d checkpoint.Data) map[string]string {
	out := map[string]string{}
	for _, e := range d.Allocations {
		out[e.Network+"/"+e.ContainerID+"/"+e.IfName] = strings.Join(e.IPs, ",") + " " + e.Pod.Namespace + "/" + e.Pod.Name
	}
	return out
}

// restart restarts our keeper on its bolt file: it keeps its pools, their
// addresses, allocations and cooldowns (the datastore has no restart but
// its checkpoint).
func (p *pair) restart() {
	p.note("restart ours")
	p.o.k.Close()
	p.o.start(p.t)
}

// --- the sequences ----------------------------------------------------------

// step runs one random call.
func (p *pair) step(r *rand.Rand) {
	i := r.IntN(len(prefixes))
	key := keyOf(r.IntN(8), []string{"eth0", "eth0", "eth0", "eth1"}[r.IntN(4)])
	switch n := r.IntN(100); {
	case n < 6:
		p.addENI(i)
	case n < 9:
		p.removeENI(i, r.IntN(3) == 0)
	case n < 27:
		p.addAddr(i, p.someAddr(r, i))
	case n < 35:
		p.delAddr(i, p.someAddr(r, i), r.IntN(3) == 0)
	case n < 62:
		p.assign(key)
	case n < 80:
		p.unassign(key)
	case n < 88:
		p.advance(time.Duration(1+r.IntN(3)) * 10 * time.Second)
	case n < 94:
		p.freeable(i)
	case n < 99 || !p.onBolt:
		p.removeUnused(r.IntN(3)*3, r.IntN(3)*4)
	default:
		p.restart()
	}
}

// someAddr is an address to add to or delete from ENI i: mostly of its
// window, sometimes one it never hands out, or one of another ENI.
func (p *pair) someAddr(r *rand.Rand, i int) netip.Addr {
	switch n := r.IntN(20); {
	case n == 0:
		return reservedOf(i)[r.IntN(4)]
	case n == 1:
		return window((i + 1) % len(prefixes))[r.IntN(4)]
	}
	return window(i)[r.IntN(4)]
}

// TestRandomSequencesAgree runs random sequences of calls on both sides
// and compares every outcome and, after every call, the state; at the end
// every difference of the table must have been met (see
// differences_test.go).
func TestRandomSequencesAgree(t *testing.T) {
	met := map[string]int{}
	calls := 0
	for seq := range *seqs {
		t.Run(fmt.Sprintf("seq%d", seq), func(t *testing.T) {
			p := newPair(t, seq%4 == 3)
			r := rand.New(rand.NewPCG(uint64(seq), 0x0a3d))
			for range *steps {
				p.step(r)
				p.check()
				calls++
			}
			if seq%3 == 0 && len(p.awsAllocated()) > 0 {
				var gone podmanager.AttachmentKey
				if seq%2 == 0 {
					for _, k := range p.awsAllocated() {
						parts := strings.Split(k, "/")
						gone = podmanager.AttachmentKey{Network: parts[0], ContainerID: parts[1], IfName: parts[2]}
						break
					}
				}
				p.restore(gone)
				for range 20 {
					p.step(r)
					p.check()
					calls++
				}
			}
			for k, n := range p.met {
				met[k] += n
			}
		})
	}
	t.Logf("%d sequences, %d calls; differences met: %v", *seqs, calls, met)
	checkTable(t, met)
}
