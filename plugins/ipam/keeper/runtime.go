package keeper

import (
	"errors"
	"fmt"
	"time"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// The runtime witness: where the node's container runtime (CRI) can be
// asked (podmanager.conf criSocket), it has the last word on whether a
// pod still lives. An absent pod (evidence.go) is released only if a list
// of the runtime's sandboxes begun after its grace period ended holds no
// sandbox of it (by the attachment's container ID, or by pod name with a
// UID that may be its own); never while the last list failed. And the
// keeper runs the CNI GC the runtime never calls: an attachment whose
// sandbox two lists a GC period apart both lack is released.

// RuntimeList is one look at the runtime: its pod sandboxes, and when the
// list began (the keeper's clock); Err when it could not be asked.
type RuntimeList struct {
	Started   time.Time
	Sandboxes []podmanager.Sandbox
	Err       error
}

// runtimeView is what the keeper knows of the runtime (owned by run; on
// and gcPeriod are set before Start).
type runtimeView struct {
	on       bool
	gcPeriod time.Duration // 0: no GC against the runtime's list
	seen     bool          // a list answered since start
	err      string        // the last look's failure ("" when it answered)
	started  time.Time     // when the last answered list began
	lists    uint64        // answered lists so far: the last one's number
	ids      map[string]bool
	pods     map[podmodel.ID][]string // the UIDs of each pod's sandboxes
	// lastGC is when the list of the last GC look began; suspects are the
	// attachments it found without a sandbox, with that time.
	lastGC   time.Time
	suspects map[allocKey]time.Time
	blocked  string // the runtime part of why absent pods wait, as reported
}

// UseRuntime makes the runtime a witness (see above); gcPeriod > 0 also
// runs the GC against its list. Call it before Start.
func (k *Keeper) UseRuntime(gcPeriod time.Duration) error {
	if k.running.Load() {
		return errors.New("keeper: UseRuntime after Start")
	}
	k.rt = runtimeView{on: true, gcPeriod: gcPeriod, suspects: map[allocKey]time.Time{}}
	return nil
}

// LookAtRuntime takes a look at the runtime: it notes the list (the
// absent pods due are decided at the sweep it arms) and runs the GC when
// its period has passed; it returns once the GC's deletes are known.
// A barrier, like a CNI GC.
func (k *Keeper) LookAtRuntime(l RuntimeList) (released int, err error) {
	rep := k.Do(&Request{Kind: reqRead, read: func(t *table) {
		k.noteRuntime(l)
		if l.Err == nil {
			released, err = k.runtimeGC(t, l)
		}
	}})
	if rep.Err != nil {
		return 0, rep.Err
	}
	return released, err
}

// noteRuntime keeps what a look saw; the sweep is armed again (due
// absent pods may be decidable now).
func (k *Keeper) noteRuntime(l RuntimeList) {
	if !k.rt.on {
		return
	}
	k.pipe.rearm = true
	if l.Err != nil {
		k.rt.err = l.Err.Error()
		return
	}
	k.rt.seen, k.rt.err, k.rt.started = true, "", l.Started
	k.rt.lists++
	k.rt.ids = make(map[string]bool, len(l.Sandboxes))
	k.rt.pods = make(map[podmodel.ID][]string, len(l.Sandboxes))
	for _, s := range l.Sandboxes {
		k.rt.ids[s.ID] = true
		k.rt.pods[s.Pod] = append(k.rt.pods[s.Pod], s.UID)
	}
}

// runtimeBlock tells why the runtime keeps absent pods ("": it does not).
func (k *Keeper) runtimeBlock() string {
	switch {
	case !k.rt.on:
		return ""
	case k.rt.err != "":
		return "the container runtime cannot be asked whether the pods live: " + k.rt.err
	case !k.rt.seen:
		return "the container runtime has not listed its pod sandboxes yet"
	}
	return ""
}

// releaseBlock tells why absent pods are not released now ("": they are,
// after their grace period): the mirror's evidence, then the runtime.
func (k *Keeper) releaseBlock() string {
	if why := k.evidence(); why != "" {
		return why
	}
	return k.runtimeBlock()
}

// reportRuntime logs a change of the runtime part of the block.
func (k *Keeper) reportRuntime() {
	why := k.runtimeBlock()
	if why == k.rt.blocked {
		return
	}
	k.rt.blocked = why
	if why != "" {
		k.log.Warn("pods missing from Kubernetes are not released: "+why, "held-pods-missing", len(k.absent))
		return
	}
	k.log.Info("the container runtime answers: it is asked before a pod missing from Kubernetes is released")
}

// sandboxOf tells whether the last list holds a sandbox of allocation
// key: its container ID, or a sandbox of its pod whose UID may be its own
// (either unknown, or equal).
func (k *Keeper) sandboxOf(t *table, key allocKey) bool {
	if id := key.att.ContainerID; id != "" && k.rt.ids[id] {
		return true
	}
	own := t.uids[key]
	for _, uid := range k.rt.pods[t.podOf(key)] {
		if uid == "" || own == "" || uid == own {
			return true
		}
	}
	return false
}

// sandboxLives tells whether the runtime's last list has a sandbox of
// one of keys.
func (k *Keeper) sandboxLives(t *table, keys []allocKey) bool {
	if !k.rt.on || !k.rt.seen {
		return false
	}
	for _, key := range keys {
		if k.sandboxOf(t, key) {
			return true
		}
	}
	return false
}

// keptByRuntime tells whether the runtime keeps absent pod id, whose
// allocations keys are missing: no list begun since its grace period
// ended (wait for the next look), or a sandbox of one of keys in the
// last list; then the absence waits for a newer list (keptBy).
func (k *Keeper) keptByRuntime(id podmodel.ID, keys []allocKey) bool {
	if !k.rt.on {
		return false
	}
	a := k.absent[id]
	if !k.rt.seen || k.rt.err != "" || k.rt.started.Before(a.since.Add(k.cfg.AbsentPodGracePeriod)) {
		return true
	}
	if k.sandboxLives(k.tab, keys) {
		a.keptBy = k.rt.lists
		k.absent[id] = a
		return true
	}
	return false
}

// decidable tells whether an absent pod whose grace period ended at end
// can be decided at a sweep now: without a runtime witness always; with
// one only after a look begun since end that it was not kept by already
// (its arrival arms the sweep again).
func (k *Keeper) decidable(a absence, end time.Time) bool {
	if !k.rt.on {
		return true
	}
	return k.rt.err == "" && k.rt.seen && !k.rt.started.Before(end) && a.keptBy != k.rt.lists
}

// runtimeGC releases the attachments of Kubernetes pods whose sandbox the
// runtime lacked at two looks at least gcPeriod apart, made before the
// first of them; pod-keyed allocations and plain containers are never
// its garbage. It returns once the deletes' outcomes are known.
func (k *Keeper) runtimeGC(t *table, l RuntimeList) (released int, err error) {
	if !k.rt.on || k.rt.gcPeriod <= 0 || (!k.rt.lastGC.IsZero() && l.Started.Sub(k.rt.lastGC) < k.rt.gcPeriod) {
		return 0, nil
	}
	prev := k.rt.suspects
	k.rt.lastGC, k.rt.suspects = l.Started, map[allocKey]time.Time{}
	var due []allocKey
	for key, pod := range t.pods {
		if key.att.ContainerID == "" || neverAbsent(pod) || k.sandboxOf(t, key) {
			continue
		}
		if born := t.born[key]; !born.IsZero() && !born.Before(l.Started) {
			continue // made during the list: its sandbox may not be listed yet
		}
		if _, ok := prev[key]; ok {
			due = append(due, key)
			continue
		}
		k.rt.suspects[key] = l.Started
	}
	sortKeys(due)
	return k.releaseGarbage(due, ReleaseRuntime, "released: the container runtime has no sandbox of it")
}

// releaseGarbage releases keys for reason and returns once every
// delete's outcome is known: the number released and the errors of the
// others.
func (k *Keeper) releaseGarbage(keys []allocKey, reason, what string) (released int, err error) {
	b := newBatch()
	var errs []error
	for _, key := range keys {
		done := k.releaseDone(key, reason, what, nil)
		k.addRelease(b, key, func(o outcome, e error) {
			done(o, e)
			if o == durable {
				released++
				return
			}
			errs = append(errs, fmt.Errorf("%s: %w", key, e))
		})
	}
	k.flush(b)
	return released, errors.Join(errs...)
}
