package keeper

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/ksr/model/mirror"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// The evidence rule: a pod holding addresses is absent (a release
// candidate) only when the live Kubernetes state lacks it, or holds a pod
// of its name with another UID, while contiv-ksr's mirror marker is
// fresh and changed after the allocation was made; it is released only
// if a look a grace period later, with a fresh marker again, still
// misses it. Without a marker, with a stale one, or with a state much
// emptier than the marker says, nothing is released by absence.

// staleBeats is how many heartbeat periods may pass without a newer
// marker before it is stale.
const staleBeats = 3

// mirrorView is what the keeper knows of contiv-ksr's mirror marker
// (owned by run).
type mirrorView struct {
	last mirror.Marker // the newest marker seen
	seen bool          // a marker was seen since the agent started
	// changed is when (keeper clock) a marker newer than the one before
	// was seen; zero until the second marker (the first may be a dead
	// contiv-ksr's last word).
	changed time.Time
	// blocked is why absent pods are not released ("": they are), as
	// last reported.
	blocked string
}

// note serves the requests that tell what the Kubernetes state holds.
// A newer marker sets the sweep timer again (the evidence may have become
// fresh: the grace periods count again).
func (k *Keeper) note(r *Request) {
	switch r.Kind {
	case ReqPodSeen:
		k.seen(r.Pod, r.UID, r.NodeScoped)
	case ReqPodGone:
		k.gone(r.Pod, r.UID)
	case ReqMirror:
		if k.noteMirror(r.Mirror) {
			k.pipe.rearm = true
			k.noteAllHeld()
		}
	}
}

// noteMirror takes a marker (nil: deleted, which changes nothing: the
// last one goes stale) and tells whether it is a change: a heartbeat
// after the newest one seen. An older marker (a store restored from a
// snapshot) is no change. A change after the marker went stale starts
// every grace period again (see restartAbsences).
func (k *Keeper) noteMirror(m *mirror.Marker) bool {
	if m == nil {
		return false
	}
	if !k.mir.seen {
		k.mir.last, k.mir.seen = *m, true
		return false
	}
	if !m.Heartbeat.After(k.mir.last.Heartbeat) {
		return false
	}
	now := k.clock.Now()
	gap := !k.mir.changed.IsZero() && now.Sub(k.mir.changed) > k.staleAfter()
	k.mir.last, k.mir.changed = *m, now
	if gap {
		k.restartAbsences()
	}
	return true
}

// restartAbsences starts every grace period again, now: the evidence was
// not fresh for a while, and a pod missing at the look before may have
// been there meanwhile, unseen (contiv-ksr stopped before it mirrored
// it). Both looks of a release are made within one fresh stretch.
func (k *Keeper) restartAbsences() {
	now := k.clock.Now()
	for id, a := range k.absent {
		a.since = now
		k.absent[id] = a
	}
	k.pipe.rearm = true
}

// evidence tells why absence is no evidence now ("": it is), for the
// current state.
func (k *Keeper) evidence() string {
	return k.evidenceOf(k.view.live, len(k.view.pods), k.view.nodeScoped, k.view.empty)
}

// evidenceOf tells why absence is no evidence now ("": it is), for a
// state (live: from etcd) of pods pods. The marker counts the pods of the
// cluster: a state of this node's pods alone (nodeScoped, the per-node
// layout) is not compared with it, nor is a state that had no pod at its
// resync (empty: a node with none yet, in the per-node layout, cannot tell
// its scope; an empty state releases nothing anyway, see kubeView.empty).
// A state whose pods the watch then deleted is still compared: an emptied
// store is no evidence.
func (k *Keeper) evidenceOf(live bool, pods int, nodeScoped, empty bool) string {
	m := &k.mir
	switch {
	case !live:
		return "the Kubernetes state is the local copy, not etcd's"
	case !m.seen:
		return "no contiv-ksr mirror marker (" + mirror.Key + ") in etcd: contiv-ksr is not running or is older than this agent"
	case m.changed.IsZero():
		return "contiv-ksr's mirror marker has not changed since this agent started"
	case k.clock.Now().Sub(m.changed) > k.staleAfter():
		return fmt.Sprintf("contiv-ksr's mirror marker has not changed for %s (its heartbeat is %s): contiv-ksr stopped or is cut off",
			k.clock.Now().Sub(m.changed).Round(time.Second), m.last.Interval)
	case !nodeScoped && !empty && pods < m.last.Pods/2:
		return fmt.Sprintf("the Kubernetes state holds %d pods, contiv-ksr's mirror marker says %d: the store is emptier than the mirror", pods, m.last.Pods)
	}
	return ""
}

// staleAfter is how long a marker stays fresh without a newer one.
func (k *Keeper) staleAfter() time.Duration {
	return staleBeats * max(k.mir.last.Period(), time.Second)
}

// staleAt is when the marker goes stale (zero when it is not fresh).
func (k *Keeper) staleAt() time.Time {
	if k.mir.changed.IsZero() {
		return time.Time{}
	}
	return k.mir.changed.Add(k.staleAfter())
}

// noteEvidence takes a change of whether absence is evidence at the
// moment of the event that changed it (a marker, a pod, a resync), before
// its caller is answered: a grace period that starts again when the
// evidence is fresh again starts then, not at the next turn of the loop,
// which may come after the clock has moved (a test's fake clock did, and
// the period ended a whole period late). The gauge of whether absent pods
// are released follows at once too.
func (k *Keeper) noteEvidence() {
	if k.tab != nil {
		k.reportEvidence(k.evidence())
		k.metrics.evidence.Set(boolGauge(k.releaseBlock() == ""))
	}
}

// reportEvidence logs and shows a change of whether absent pods are
// released.
func (k *Keeper) reportEvidence(why string) {
	if why == k.mir.blocked {
		return
	}
	if why == "" {
		k.restartAbsences() // fresh again after a stretch without evidence
	}
	k.mir.blocked = why
	if why != "" {
		k.log.Warn("pods missing from Kubernetes are not released: "+why, "held-pods-missing", len(k.absent))
		return
	}
	k.log.Info("contiv-ksr's mirror is fresh: pods missing from Kubernetes are released after their grace period")
}

// missing tells whether the pod of allocation key is missing from the
// Kubernetes state: no pod of its name, or one with another UID (when
// both are known).
func missing(pods map[podmodel.ID]string, t *table, key allocKey) bool {
	uid, ok := pods[t.podOf(key)]
	if !ok {
		return true
	}
	own := t.uids[key]
	return uid != "" && own != "" && uid != own
}

// missingKeys are the allocations of pod that are missing.
func missingKeys(pods map[podmodel.ID]string, t *table, id podmodel.ID) []allocKey {
	var out []allocKey
	for _, key := range t.keysOf(id) {
		if missing(pods, t, key) {
			out = append(out, key)
		}
	}
	return out
}

// podMissing tells whether an allocation of pod is missing.
func (k *Keeper) podMissing(id podmodel.ID) bool {
	return len(missingKeys(k.view.pods, k.tab, id)) > 0
}

// newest is when the pod's newest allocation was made (zero: unknown).
func (t *table) newest(id podmodel.ID) time.Time {
	var at time.Time
	for _, key := range t.keysOf(id) {
		if b := t.born[key]; b.After(at) {
			at = b
		}
	}
	return at
}

// seen notes a pod of the Kubernetes state: it is not absent (unless
// the pod holding addresses under its name has another UID).
func (k *Keeper) seen(id podmodel.ID, uid string, nodeScoped bool) {
	if k.view.pods == nil {
		k.view.pods = map[podmodel.ID]string{}
	}
	k.view.nodeScoped = nodeScoped && (k.view.nodeScoped || len(k.view.pods) == 0)
	k.view.pods[id] = uid
	k.view.empty = false
	if k.tab == nil || !k.podMissing(id) {
		delete(k.absent, id)
		return
	}
	k.noteHeld(id)
}

// gone notes a pod deleted from the Kubernetes state: the first look
// that misses it (its grace period starts). A delete of another UID
// than the state holds under the name is stale and changes nothing.
func (k *Keeper) gone(id podmodel.ID, uid string) {
	if cur, ok := k.view.pods[id]; ok && cur != "" && uid != "" && cur != uid {
		k.log.Info("ignoring the delete of a pod whose name another pod holds now", "pod", id.String(), "deleted-uid", uid, "uid", cur)
		return
	}
	delete(k.view.pods, id)
	if k.tab != nil {
		k.noteHeld(id)
	}
}

// noteHeld starts the grace period of a held pod that is missing from
// the live Kubernetes state, if that is evidence now: the marker is
// fresh and changed after the pod's newest allocation. Plain containers
// are never absent.
func (k *Keeper) noteHeld(id podmodel.ID) {
	if !k.view.live || k.view.empty || neverAbsent(id) || !k.podMissing(id) {
		return
	}
	keys := missingKeys(k.view.pods, k.tab, id)
	if a, ok := k.absent[id]; ok && a.covers(keys) {
		return
	}
	if k.evidence() != "" || !k.tab.newest(id).Before(k.mir.changed) {
		return
	}
	now := k.clock.Now()
	k.absent[id] = absence{since: now, keys: keys}
	if end := now.Add(k.cfg.AbsentPodGracePeriod); k.sweep.c == nil || end.Before(k.sweep.at) {
		k.pipe.rearm = true // its end comes before the timer set now
	}
}

// absence is the grace period of a held pod that is missing: since when,
// and which of its allocations were missing then. An allocation that
// goes missing later (another UID of the name) starts the period again:
// each must be missing for a whole period before it is released.
type absence struct {
	since time.Time
	keys  []allocKey
	// keptBy is the number of the runtime's list that found a sandbox
	// of it (runtime.go; 0: none): the next sweep waits for a newer list.
	keptBy uint64
}

// covers tells whether every allocation of missing was missing since
// a.since.
func (a absence) covers(missing []allocKey) bool {
	for _, key := range missing {
		if !slices.Contains(a.keys, key) {
			return false
		}
	}
	return true
}

// noteAllHeld starts the grace period of every held pod that is
// missing now (after a marker change).
func (k *Keeper) noteAllHeld() {
	if k.tab == nil {
		return
	}
	for id := range k.tab.byPod {
		k.noteHeld(id)
	}
}

// markerOf is the mirror marker of a Kubernetes state, if it has a
// readable one (the watcher keeps a bad value's last good one).
func markerOf(ks api.KubeStateData) (mirror.Marker, bool) {
	v, ok := ks[mirror.Keyword][mirror.Key].(*structpb.Struct)
	if !ok {
		return mirror.Marker{}, false
	}
	m, err := mirror.FromStruct(v)
	return m, err == nil
}

// MarkerFromStruct decodes a marker as the watchers carry it.
func MarkerFromStruct(v *structpb.Struct) (*mirror.Marker, error) {
	m, err := mirror.FromStruct(v)
	if err != nil {
		return nil, err
	}
	return &m, nil
}
