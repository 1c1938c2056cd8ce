package podmanager

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// errObsoletePod: an AddPod names a pod that is recorded with another
// container (Contiv's "obsolete pod configuration"); the Add call deletes
// the old container's attachments and pushes the AddPod again.
var errObsoletePod = errors.New("obsolete pod configuration")

// podTable is the record of the pods connected on this node.
//
// Owner: the event loop. Only podmanager's Update and Revert (called by
// the loop, one event at a time) change pods and undo; the mutex lets any
// goroutine read copies (GetLocalPods, the obsolete check of Add).
type podTable struct {
	mu   sync.RWMutex
	pods LocalPods

	// undo reverts what the last applied AddPod changed (nil: nothing);
	// written and read by the loop only. The loop reverts an event before
	// it processes the next one, so the last AddPod is the only one that
	// can be reverted.
	undoFor *AddPod
	undo    func()
}

func newPodTable() *podTable { return &podTable{pods: LocalPods{}} }

// addPod records ev's attachment (loop only). A pod recorded with another
// container is an error wrapping errObsoletePod; a key recorded already
// changes nothing.
func (t *podTable) addPod(ev *AddPod) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.undoFor, t.undo = ev, nil
	old := t.pods[ev.Pod]
	switch {
	case old == nil:
		t.pods[ev.Pod] = newLocalPod(ev)
		t.undo = func() { delete(t.pods, ev.Pod) }
	case old.ContainerID != ev.Key.ContainerID && ReusedName(old.UID, ev.PodUID):
		t.pods[ev.Pod] = newLocalPod(ev) // another pod of the name: the old one's DEL is its own
		t.undo = func() { t.pods[ev.Pod] = old }
	case old.ContainerID != ev.Key.ContainerID && len(old.Attachments) == 0:
		// a sandbox adopted from the runtime at start, never added since:
		// IPAM releases its attachments as obsolete
		t.pods[ev.Pod] = newLocalPod(ev)
		t.undo = func() { t.pods[ev.Pod] = old }
	case old.ContainerID != ev.Key.ContainerID:
		return fmt.Errorf("%w: pod %s is connected with container %q, the call names container %q",
			errObsoletePod, ev.Pod, old.ContainerID, ev.Key.ContainerID)
	case !slices.Contains(old.Attachments, ev.Key):
		old.Attachments = append(old.Attachments, ev.Key)
		t.undo = func() { t.dropKeyLocked(ev.Pod, ev.Key) }
	}
	return nil
}

func newLocalPod(ev *AddPod) *LocalPod {
	return &LocalPod{ID: ev.Pod, UID: ev.PodUID, ContainerID: ev.Key.ContainerID, NetworkNamespace: ev.NetworkNamespace,
		Attachments: []AttachmentKey{ev.Key}}
}

// ReusedName tells whether two UIDs of one pod name are of two pods (a
// pod re-created under the name, as a StatefulSet does): both are known
// and differ.
func ReusedName(old, uid string) bool { return old != "" && uid != "" && old != uid }

// revertAdd undoes the last addPod if it was for ev (loop only).
func (t *podTable) revertAdd(ev *AddPod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.undoFor == ev && t.undo != nil {
		t.undo()
	}
	t.undoFor, t.undo = nil, nil
}

// deletePod drops the attachment key of pod (loop only); a pod left with
// no attachment is dropped. An attachment of another container (an old
// container's DEL) leaves the pod's current container alone.
func (t *podTable) deletePod(pod podmodel.ID, key AttachmentKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropKeyLocked(pod, key)
}

func (t *podTable) dropKeyLocked(pod podmodel.ID, key AttachmentKey) {
	lp := t.pods[pod]
	if lp == nil {
		return
	}
	if len(lp.Attachments) == 0 && lp.ContainerID == key.ContainerID {
		delete(t.pods, pod) // adopted from the runtime: its keys are unknown
		return
	}
	lp.Attachments = slices.DeleteFunc(lp.Attachments, func(k AttachmentKey) bool { return k == key })
	if len(lp.Attachments) == 0 {
		delete(t.pods, pod)
	}
}

// adopt records the sandboxes of Kubernetes pods that the table lacks
// (AfterInit, before any event), without attachments: their keys are
// IPAM's. It returns how many it recorded.
func (t *podTable) adopt(sbs []Sandbox) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range sbs {
		if s.Pod.Name == "" || s.Pod.Namespace == "" || t.pods[s.Pod] != nil {
			continue
		}
		if !s.Ready {
			continue // stopped: its network is gone or going (its DEL comes)
		}
		t.pods[s.Pod] = &LocalPod{ID: s.Pod, UID: s.UID, ContainerID: s.ID}
		n++
	}
	return n
}

// gc drops every attachment of network that valid does not list (loop
// only), and the pods left with none.
func (t *podTable) gc(network string, valid []AttachmentKey) {
	keep := make(map[AttachmentKey]bool, len(valid))
	for _, k := range valid {
		keep[k] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, lp := range t.pods {
		lp.Attachments = slices.DeleteFunc(lp.Attachments, func(k AttachmentKey) bool {
			return k.Network == network && !keep[k]
		})
		if len(lp.Attachments) == 0 {
			delete(t.pods, id)
		}
	}
}

// get returns a copy of the pod's record.
func (t *podTable) get(pod podmodel.ID) (LocalPod, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	lp := t.pods[pod]
	if lp == nil {
		return LocalPod{}, false
	}
	return copyPod(lp), true
}

// snapshot returns a deep copy of every record.
func (t *podTable) snapshot() LocalPods {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(LocalPods, len(t.pods))
	for id, lp := range t.pods {
		c := copyPod(lp)
		out[id] = &c
	}
	return out
}

func copyPod(lp *LocalPod) LocalPod {
	c := *lp
	c.Attachments = slices.Clone(lp.Attachments)
	return c
}
