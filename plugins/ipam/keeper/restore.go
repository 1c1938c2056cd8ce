package keeper

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// podResource is the resource keyword of the Kubernetes pods.
const podResource = podmodel.Keyword

// CursorKey is the store key of the next-fit cursor: the last address
// handed out, written with every batch of allocations. SecondCursorKey is
// the cursor of the second family of a dual-stack node.
const (
	CursorKey       = "/contiv-agent/ipam/cursor"
	SecondCursorKey = "/contiv-agent/ipam/cursor-second"
)

// cursorKey is the cursor key of slot i.
func cursorKey(i int) string {
	if i == 0 {
		return CursorKey
	}
	return SecondCursorKey
}

// ResyncInput is a resync handed to the keeper.
type ResyncInput struct {
	State     *addressing.State
	KubeState api.KubeStateData
	// Live tells whether the state comes from etcd; nil keeps what the
	// previous resync said (healing resyncs and PodCIDRChange use the
	// loop's state, which the watch keeps current).
	Live *bool
	// Event names the resync in the log.
	Event string
	// HostIPs are this node's addresses: a pod whose host address is one
	// of them runs here.
	HostIPs map[netip.Addr]struct{}
	// Exclusions are applied to the new table (see exclusion.go).
	Exclusions []Exclusion
}

// record is one stored allocation.
type record struct {
	key  allocKey
	raw  []byte // the stored value
	pod  podmodel.ID
	uid  string       // the pod's UID, "" when unknown
	ips  []netip.Addr // as stored: one or two, of different families
	addr Addrs        // ips by slot (set by slotted)
	resv *reservation
	at   time.Time // when it was made (zero: unknown)
	rev  int64
}

// slotted sets r.addr from r.ips: every address in a pod subnet of its
// family in t; false when one is not (the record is dropped).
func (r *record) slotted(t *table) bool {
	r.addr = Addrs{}
	for _, a := range r.ips {
		_, i, ok := t.blockOf(a)
		if !ok && !t.externalMode() {
			return false
		}
		if t.externalMode() {
			if i, ok = t.slotOf(a); !ok || !t.st.Families()[i].PodThis.Contains(a) {
				return false
			}
		}
		r.addr[i] = a
	}
	return len(r.ips) > 0
}

// kubePod is a pod of the Kubernetes state.
type kubePod struct {
	id   podmodel.ID
	uid  string
	addr Addrs // by slot; none valid when the pod has no (readable) address
}

// plan is what a resync decided: the new table, and the records to write.
type plan struct {
	t         *table
	stale     []string                // record keys to delete
	conflicts []conflict              // records to move aside
	learned   map[podmodel.ID]Addrs   // records to (re)write from Kubernetes
	reclaim   map[podmodel.ID]string  // pods to release now (every allocation), with the reason
	absent    map[podmodel.ID]absence // held pods in their grace period
	inKube    map[podmodel.ID]string  // the pods of the new state, with their UIDs
	// nodeScoped: every pod key of the new state is of the per-node
	// layout (and there is one).
	nodeScoped bool
}

// resync rebuilds the table from the store and the Kubernetes state. It
// runs on the keeper's goroutine between batches, so no write is in
// flight: the store holds every acknowledged allocation.
func (k *Keeper) resync(in *ResyncInput) error {
	t, err := newTable(in.State)
	if err != nil {
		return err
	}
	k.last = in
	k.restoreBlocks(t)
	recs, cursor, err := k.load()
	if err != nil {
		return err
	}
	cooling, err := k.loadCooling()
	if err != nil {
		return err
	}
	live := k.view.live
	if in.Live != nil {
		live = *in.Live
	}
	p := &plan{t: t, learned: map[podmodel.ID]Addrs{}, reclaim: map[podmodel.ID]string{},
		absent: map[podmodel.ID]absence{}, inKube: map[podmodel.ID]string{}}
	kube := k.kubePods(in, t)
	p.nodeScoped = nodeScoped(in.KubeState[podResource])
	k.claimRecords(p, recs, kube)
	k.claimKube(p, kube)
	k.applyExclusions(t, in)
	k.restoreCooling(p, cooling)
	if m, ok := markerOf(in.KubeState); ok && live {
		k.noteMirror(&m)
	}
	if live {
		k.planAbsent(p, len(in.KubeState[podmodel.Keyword]))
	}
	k.tab, k.view, k.absent, k.retry = t, kubeView{live: live, pods: p.inKube, empty: len(in.KubeState[podmodel.Keyword]) == 0,
		nodeScoped: p.nodeScoped},
		p.absent, map[string]struct{}{}
	for id := range k.young {
		if len(t.byPod[id]) == 0 {
			delete(k.young, id)
		}
	}
	k.setCursors(cursor)
	if g, ok := grantOf(in.KubeState, in.State.NodeName); ok {
		k.applyGrant(t, g)
	}
	for i := range t.slots() {
		k.checkWarm(i)
	}
	k.el.emptySince = map[netip.Prefix]time.Time{}
	k.shrink() // an added block restored empty starts its block cooldown now
	k.commit(k.tidyWrites(p))
	k.moveAside(p.conflicts)
	k.log.Info("ipam initialised", "node-id", in.State.NodeID, "pod-subnet", in.State.PodThis.String(),
		"gateway", in.State.PodGW.String(), "vpp-host-subnet", in.State.HostThis.String(), "allocated", t.len(),
		"absent", len(k.absent), "kube-state", kubeSource(live), "event", in.Event)
	return nil
}

func kubeSource(live bool) string {
	if live {
		return "etcd"
	}
	return "local mirror"
}

// kubePods lists the pods of the Kubernetes state by key. A pod whose
// key and value disagree on its name or namespace is logged and skipped;
// so is the address of a pod that runs on this node (its host address is
// this node's) outside this node's pod subnet.
func (k *Keeper) kubePods(in *ResyncInput, t *table) []kubePod {
	keys := make([]string, 0, len(in.KubeState[podResource]))
	for key := range in.KubeState[podResource] {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	out := make([]kubePod, 0, len(keys))
	for _, key := range keys {
		pod, ok := in.KubeState[podResource][key].(*podmodel.Pod)
		if !ok {
			continue
		}
		kp := kubePod{id: podmodel.GetID(pod), uid: pod.GetUid()}
		_, name, ns, err := podmodel.ParseAnyKey(key)
		if CheckPodID(kp.id) != nil || err != nil || name != kp.id.Name || ns != kp.id.Namespace {
			k.log.Warn("skipping a pod of the Kubernetes state whose key and value disagree", "key", key, "pod", kp.id.String())
			continue
		}
		kp.addr = k.kubeAddrs(in, t, pod)
		out = append(out, kp)
	}
	return out
}

// nodeScoped tells whether pods holds pods and only keys of the per-node
// layout.
func nodeScoped(pods api.KubeResourceData) bool {
	for key := range pods {
		if !strings.HasPrefix(key, podmodel.NodeKeyPrefix) {
			return false
		}
	}
	return len(pods) > 0
}

// kubeAddrs are the pod's addresses (status.podIPs, else status.podIP)
// by slot; the address of a pod that runs on this node outside its pod
// subnet is logged and skipped, and so is an address of a family the
// node does not have, or a second one of a family.
func (k *Keeper) kubeAddrs(in *ResyncInput, t *table, pod *podmodel.Pod) Addrs {
	list := pod.GetIpAddresses()
	if len(list) == 0 {
		list = []string{pod.GetIpAddress()}
	}
	var as Addrs
	for _, s := range list {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		a = a.Unmap()
		i, ok := in.State.SlotOf(a)
		if !ok || as[i].IsValid() {
			continue
		}
		if inPool := t.inPool(a) || t.externalMode() && in.State.Families()[i].PodThis.Contains(a); !inPool {
			if k.runsHere(in, pod) {
				k.log.Warn("ignoring the address of a pod of this node outside its pod subnets", "pod", podmodel.GetID(pod).String(),
					"ip", a.String(), "pod-subnets", addressing.DescribeCIDRs(in.State.PodSubnets()))
			}
			continue
		}
		as[i] = a
	}
	return as
}

// runsHere tells whether the pod's host address is this node's.
func (k *Keeper) runsHere(in *ResyncInput, pod *podmodel.Pod) bool {
	a, err := netip.ParseAddr(pod.GetHostIpAddress())
	if err != nil {
		return false
	}
	_, ok := in.HostIPs[a.Unmap()]
	return ok
}

// claimRecords restores the stored allocations. Two records of one
// address mean that a delete failed. When both are of one pod and one is
// pod-keyed, it is what an adoption left behind (the attachment wins, the
// pod-keyed record is stale); otherwise the record that Kubernetes
// confirms (its pod shows that address) wins, else the newest. Restore
// never destroys a record it cannot place: one outside the node's pod
// subnets and pools, or losing a clash, is moved aside (see moveAside).
func (k *Keeper) claimRecords(p *plan, recs []record, kube []kubePod) {
	confirmed := make(map[podmodel.ID]Addrs, len(kube))
	for _, kp := range kube {
		confirmed[kp.id] = kp.addr
	}
	kept := recs[:0]
	for _, r := range recs {
		if !r.slotted(p.t) {
			p.conflicts = append(p.conflicts, conflict{rec: r,
				reason: fmt.Sprintf("%s is not in a pod subnet or pool of this node (%s)", ipList(r.ips), p.t.blockSummary())})
			continue
		}
		kept = append(kept, r)
	}
	recs = kept
	rank := func(r record) int {
		if kc, ok := confirmed[r.pod]; ok && kc.First().IsValid() && kc.First() == r.addr.First() {
			return 0
		}
		return 1
	}
	slices.SortFunc(recs, func(a, b record) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(b.rev, a.rev), compareKeys(a.key, b.key))
	})
	for _, r := range recs {
		if winner, ok := p.t.ownerOfAny(r.addr); ok {
			k.clash(p, r, winner)
			continue
		}
		if err := p.t.claim(r.key, r.pod, r.addr); err != nil {
			p.conflicts = append(p.conflicts, conflict{rec: r, reason: "not restored: " + err.Error()})
			continue
		}
		if r.resv != nil {
			p.t.resv[r.key] = *r.resv
		}
		if !r.at.IsZero() {
			p.t.born[r.key] = r.at
		}
		if r.uid != "" {
			p.t.uids[r.key] = r.uid
		}
	}
}

// clash settles a record whose address winner holds already.
func (k *Keeper) clash(p *plan, r record, winner allocKey) {
	if p.t.podOf(winner) == r.pod && r.key.podKeyed() != winner.podKeyed() && !r.key.ownerKeyed() && !winner.ownerKeyed() {
		if winner.podKeyed() { // the attachment adopted it
			was, _ := p.t.forget(winner)
			if p.t.claim(r.key, r.pod, r.addr) != nil { // another address of r is held by someone else
				_ = p.t.claim(winner, r.pod, was)
				k.moveAsideLoser(p, r, winner)
				return
			}
			winner = r.key
		}
		k.log.Info("a pod-keyed record an attachment adopted is deleted", "pod", r.pod.String(), "ip", r.addr.String(), "attachment", winner.String())
		p.stale = append(p.stale, podKey(r.pod))
		return
	}
	k.moveAsideLoser(p, r, winner)
}

// moveAsideLoser moves r aside: winner holds one of its addresses.
func (k *Keeper) moveAsideLoser(p *plan, r record, winner allocKey) {
	p.conflicts = append(p.conflicts, conflict{rec: r, winner: winner, winnerPod: p.t.podOf(winner),
		reason: "another record holds " + r.addr.String() + ": " + winner.String()})
}

// ipList joins addresses with commas.
func ipList(ips []netip.Addr) string {
	parts := make([]string, len(ips))
	for i, a := range ips {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}

// blockSummary lists the node's pod subnets and pools, or says that an
// external IPAM gives them.
func (t *table) blockSummary() string {
	if t.externalMode() {
		return "external IPAM: " + addressing.DescribeCIDRs(t.st.PodSubnets())
	}
	var parts []string
	for i := range t.slots() {
		parts = append(parts, t.blockList(i))
	}
	return strings.Join(parts, ",")
}

// ownerOfAny finds an allocation holding one of as.
func (t *table) ownerOfAny(as Addrs) (allocKey, bool) {
	for _, a := range as.List() {
		if k, ok := t.owner(a); ok {
			return k, true
		}
	}
	return allocKey{}, false
}

// claimKube learns the addresses of the Kubernetes pods that hold none
// (their record is missing, for example a new store file), for addresses
// in the pod subnet that no pod holds; the first pod by key wins a clash.
// A stored record wins over the pod's address in Kubernetes: every record
// is an acknowledged decision of this agent that no release has undone,
// while the Kubernetes state may lag (an earlier instance of a re-created
// pod, a pod whose deletion is not reflected yet).
func (k *Keeper) claimKube(p *plan, kube []kubePod) {
	var differ int
	for _, kp := range kube {
		p.inKube[kp.id] = kp.uid
		if !kp.addr.First().IsValid() || kp.id.Namespace == podmanager.ContainerNamespace {
			continue
		}
		if _, held, ok := p.t.podAddr(kp.id); ok {
			if held != kp.addr.First() {
				differ++
			}
			continue
		}
		if winner, ok := p.t.ownerOfAny(kp.addr); ok {
			k.log.Warn("two pods hold one address in Kubernetes: the address stays with the first", "ip", kp.addr.String(),
				"kept", winner.String(), "ignored", kp.id.String())
			continue
		}
		if err := p.t.claim(podKeyOf(kp.id), kp.id, kp.addr); err != nil {
			k.log.Warn("pod address from Kubernetes not restored", "pod", kp.id.String(), "error", err)
			continue
		}
		p.learned[kp.id] = kp.addr
	}
	if differ > 0 {
		k.log.Info("pods whose address in Kubernetes differs from the stored one keep the stored one", "pods", differ)
	}
}

// planAbsent decides, with a live Kubernetes state, about every held pod
// that state misses (no pod of its name, or one of another UID): its
// grace period starts (or goes on) and it is released once the period is
// over and the pod is still missing, so its absence is seen twice, a
// grace period apart. A pod the previous state had is no exception: its
// delete may have been lost in a watch gap, but an emptied or replaced
// store looks the same, and one look is no evidence. Neither is a look
// while contiv-ksr's mirror marker is missing or stale, or older than
// the pod's allocation (see evidence.go): no period starts and nothing is
// released then. A state without any pod at all is no evidence either (an
// etcd restarted empty, a wrong endpoint).
func (k *Keeper) planAbsent(p *plan, podsInState int) {
	now := k.clock.Now()
	for id, at := range k.young {
		if now.Sub(at) >= k.cfg.AbsentPodGracePeriod {
			delete(k.young, id)
		}
	}
	why := k.evidenceOf(true, len(p.inKube), p.nodeScoped, podsInState == 0)
	paused := 0
	for id := range p.t.byPod {
		keys := missingKeys(p.inKube, p.t, id)
		if neverAbsent(id) || len(keys) == 0 {
			continue
		}
		after := p.t.newest(id).Before(k.mir.changed)
		a, ok := k.absent[id]
		ok = ok && k.view.live && a.covers(keys)
		switch {
		case podsInState == 0:
			paused++ // untracked: no sweep releases it; the next resync looks again
			continue
		case !ok && (why != "" || !after):
			continue // no evidence now: no period starts
		case !ok:
			a = absence{since: now, keys: keys}
		}
		p.absent[id] = a
		if why == "" && after && now.Sub(a.since) >= k.cfg.AbsentPodGracePeriod {
			p.reclaim[id] = reasonAbsent
		}
	}
	if paused > 0 {
		k.log.Warn("the Kubernetes state holds no pod at all: no evidence that this node's pods are gone, nothing is released by absence",
			"held-pods-missing", paused)
	}
}

// tidyWrites are the writes that make the store match the new table:
// stale records deleted (retried with later batches if that fails),
// records learned from Kubernetes stored, reclaimed pods released.
func (k *Keeper) tidyWrites(p *plan) []write {
	var ws []write
	for _, key := range p.stale {
		ws = append(ws, write{op: kvdb.DeleteOp(key), done: func(o outcome, _ error) {
			if o != durable {
				k.retry[key] = struct{}{}
			}
		}})
	}
	for id, a := range p.learned {
		ws = append(ws, write{op: kvdb.PutOp(podKey(id), recordValue(podKeyOf(id), podRef{id: id}, a, nil, time.Time{})), done: func(o outcome, err error) {
			if o != durable {
				p.t.unsure[podKeyOf(id)] = struct{}{}
				k.log.Warn("storing a pod allocation learned from Kubernetes failed", "pod", id.String(), "error", err)
			}
		}})
	}
	for id, reason := range p.reclaim {
		for _, key := range missingKeys(p.inKube, p.t, id) {
			ws = append(ws, k.releaseWrites(p.t, key, k.reclaimDone(p.t, key, reason))...)
		}
	}
	return dedupe(ws)
}

// dedupe keeps the last write of each key (a stale record rewritten from
// Kubernetes is not deleted as well).
func dedupe(ws []write) []write {
	last := map[string]int{}
	for i, w := range ws {
		last[w.op.Key] = i
	}
	out := ws[:0]
	for i, w := range ws {
		if last[w.op.Key] == i {
			out = append(out, w)
		}
	}
	return out
}

// cursors are the stored next-fit cursors, by slot.
type cursors [2]netip.Addr

// setCursors continues next-fit in each family after its stored cursor;
// without a usable one, after the highest held address (as the original
// did after a restart, with IPv4 offsets computed right: spec §2.16 bug 1
// fixed).
func (k *Keeper) setCursors(cs cursors) {
	t := k.tab
	if t.externalMode() {
		return
	}
	for i := range t.slots() {
		k.setCursor(t.pool(i), cs[i])
	}
}

func (k *Keeper) setCursor(keyed *ipalloc.Keyed[allocKey], cursor netip.Addr) {
	pool := keyed.Pool()
	if cursor.IsValid() && pool.Contains(cursor) {
		if err := pool.SetCursor(cursor); err == nil {
			return
		} else {
			k.log.Warn("stored next-fit cursor not usable; continuing after the highest address", "cursor", cursor.String(), "error", err)
		}
	}
	var top netip.Addr
	keyed.Range(func(key allocKey, a netip.Addr) bool {
		if !key.excluded() {
			top = a
		}
		return true
	})
	if !top.IsValid() {
		return
	}
	if err := pool.SetCursor(top); err != nil {
		k.log.Warn("setting the next-fit cursor failed", "cursor", top.String(), "error", err)
	}
}

// recordSources are the key prefixes of the stored allocations and the
// parser of each.
var recordSources = []struct {
	prefix string
	parse  func(key string, value []byte) (record, error)
}{{AllocationPrefix, parseAllocation}, {AttachmentPrefix, parseAttachment}, {OwnerPrefix, parseOwner}}

// load reads the stored allocations and cursors, after checking the
// schema (and migrating an older store: see schema.go). A record that
// does not parse is reported and left in place (no data is dropped
// silently). Without a store, memory is the store.
func (k *Keeper) load() ([]record, cursors, error) {
	if k.db == nil {
		return k.memRecords()
	}
	if err := k.checkSchema(); err != nil {
		return nil, cursors{}, err
	}
	ctx, cancel := k.ctx()
	defer cancel()
	var recs []record
	for _, src := range recordSources {
		kvs, _, err := k.db.List(ctx, src.prefix)
		if err != nil {
			return nil, cursors{}, fmt.Errorf("reading pod allocations under %s: %w", src.prefix, err)
		}
		for _, kv := range kvs {
			r, err := src.parse(kv.Key, kv.Value)
			if err != nil {
				k.log.Warn("skipping a pod allocation record", "error", err)
				continue
			}
			r.rev, r.raw = kv.Revision, kv.Value
			recs = append(recs, r)
		}
	}
	var cs cursors
	for i := range cs {
		if kv, found, err := k.db.Get(ctx, cursorKey(i)); err != nil {
			k.log.Warn("reading the next-fit cursor failed", "key", cursorKey(i), "error", err)
		} else if found {
			cs[i], _ = netip.ParseAddr(string(kv.Value))
		}
	}
	return recs, cs, nil
}

// memRecords lists the current table as records.
func (k *Keeper) memRecords() ([]record, cursors, error) {
	var cs cursors
	if k.tab == nil {
		return nil, cs, nil
	}
	var recs []record
	k.tab.each(func(key allocKey, pod podmodel.ID, as Addrs) bool {
		r := record{key: key, pod: pod, ips: as.List(), at: k.tab.born[key]}
		if rv, ok := k.tab.resv[key]; ok {
			r.resv = &rv
		}
		recs = append(recs, r)
		return true
	})
	if !k.tab.externalMode() {
		for i := range k.tab.slots() {
			cs[i] = k.tab.pool(i).Pool().Cursor()
		}
	}
	return recs, cs, nil
}

// parseAllocation decodes one pod-keyed allocation record (v1 and v2:
// the value is the plain address; v3: the addresses joined with a
// comma, one per family).
func parseAllocation(key string, value []byte) (record, error) {
	rest, _ := strings.CutPrefix(key, AllocationPrefix)
	ns, name, ok := strings.Cut(rest, "/")
	id := podmodel.ID{Name: name, Namespace: ns}
	if !ok || CheckPodID(id) != nil {
		return record{}, fmt.Errorf("key %q: want %s<namespace>/<name>", key, AllocationPrefix)
	}
	ips, err := parseIPs(key, strings.Split(string(value), ","))
	if err != nil {
		return record{}, fmt.Errorf("%w (value %.80q)", err, value)
	}
	return record{key: podKeyOf(id), pod: id, ips: ips}, nil
}

// ConflictPrefix keeps the records a restore could not place: one that
// lost a clash (two records of one address), one outside every pod subnet
// and pool of the node (its pool was removed, the pod CIDR moved), one
// that did not fit its pools. ConflictPrefix + "<namespace>/<name>" for a
// pod-keyed record, ConflictPrefix +
// "attachments/<network>/<containerID>/<ifname>" (parts escaped) for an
// attachment-keyed one, ConflictPrefix + "owners/<owner>/<seq>" for an
// owner-keyed one, -> JSON {ip, ips, keptFor, reason, at, key, value, pod,
// and the attachment}: the original key and value, so that nothing is
// lost. IPAM never reads them back by itself; an operator lists them
// (GET /contiv/v1/ipam/conflicts, contiv-netctl ipam conflicts) and
// resolves each: restored (its addresses are free and in a pool) or
// discarded.
const ConflictPrefix = "/contiv-agent/ipam/conflicts/"

// conflict is a record a restore could not place, and why.
type conflict struct {
	rec       record
	winner    allocKey // the allocation holding its address (zero: none)
	winnerPod podmodel.ID
	reason    string
}

func conflictKey(key allocKey) string {
	switch {
	case key.ownerKeyed():
		return ConflictPrefix + "owners/" + strings.TrimPrefix(key.storeKey(), OwnerPrefix)
	case key.podKeyed():
		return ConflictPrefix + key.pod.Namespace + "/" + key.pod.Name
	}
	return ConflictPrefix + "attachments/" + strings.TrimPrefix(attachmentKey(key.att), AttachmentPrefix)
}

// conflictValue is the value of a record moved aside: what the record
// said, why it was moved, and the record itself (Key, Value), so that it
// can be restored as it was.
type conflictValue struct {
	IP          string       `json:"ip"`
	IPs         []netip.Addr `json:"ips,omitempty"`
	KeptFor     string       `json:"keptFor"`
	Reason      string       `json:"reason,omitempty"`
	At          string       `json:"at"`
	Key         string       `json:"key,omitempty"`
	Value       string       `json:"value,omitempty"`
	Pod         *PodName     `json:"pod,omitempty"`
	Network     string       `json:"network,omitempty"`
	ContainerID string       `json:"containerId,omitempty"`
	IfName      string       `json:"ifName,omitempty"`
}

// moveAside moves each record a restore could not place under
// ConflictPrefix, each in one transaction (the copy and the delete land
// together or not at all), logs it at error level and counts it. A
// failure leaves the record in place: the next resync decides the same
// way and tries again. Nothing is deleted without its copy.
func (k *Keeper) moveAside(cs []conflict) {
	for _, c := range cs {
		k.log.Error("a stored pod allocation could not be restored: moved aside for an operator to resolve",
			"key", c.rec.key.String(), "pod", c.rec.pod.String(), "ip", ipList(c.rec.ips), "reason", c.reason,
			"to", conflictKey(c.rec.key))
		k.metrics.movedAside.Inc()
		if k.db == nil {
			continue
		}
		v := conflictValue{IP: ipList(c.rec.ips[:1]), IPs: c.rec.ips, KeptFor: c.winnerPod.String(), Reason: c.reason,
			At: k.clock.Now().UTC().Format(time.RFC3339), Key: c.rec.key.storeKey(), Value: string(c.rec.raw)}
		if c.winner == (allocKey{}) {
			v.KeptFor = ""
		}
		if !c.rec.key.podKeyed() && !c.rec.key.ownerKeyed() {
			v.Pod = &PodName{Name: c.rec.pod.Name, Namespace: c.rec.pod.Namespace}
			v.Network, v.ContainerID, v.IfName = c.rec.key.att.Network, c.rec.key.att.ContainerID, c.rec.key.att.IfName
		}
		value, _ := json.Marshal(v)
		ops := []kvdb.Op{kvdb.PutOp(conflictKey(c.rec.key), value), kvdb.DeleteOp(c.rec.key.storeKey())}
		ws := []write{{op: ops[0], done: func(outcome, error) {}}, {op: ops[1], done: func(o outcome, err error) {
			if o != durable {
				k.log.Warn("moving a record aside failed; the next resync tries again", "key", c.rec.key.String(), "error", err)
			}
		}}}
		k.commit(ws)
	}
}
