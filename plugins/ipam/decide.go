package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// allocate decides the pod's address and adds its record to b. The
// caller is answered once the record is durable; if it is not, the
// decision is undone, or, when the outcome is unknown, the address stays
// reserved for the pod (see table.unsure).
func (k *keeper) allocate(r *request, b *batch) {
	t := k.tab
	d, err := t.decide(r.pod, r.data)
	if err != nil {
		k.metrics.failed.Inc()
		r.answer(reply{err: err})
		return
	}
	if !d.store {
		k.young[r.pod] = k.clock.Now() // acknowledged (again) now
		r.answer(reply{addr: d.addr})
		return
	}
	b.cursor = b.cursor || !t.externalMode()
	b.add(write{op: kvdb.PutOp(podKey(r.pod), []byte(d.addr.String())), done: func(o outcome, err error) {
		switch o {
		case durable:
			delete(t.unsure, r.pod)
			k.young[r.pod] = k.clock.Now() // acknowledged now
			k.noteHeld(r.pod)
			r.answer(reply{addr: d.addr})
		case failed:
			d.undo()
			k.metrics.failed.Inc()
			r.answer(reply{err: fmt.Errorf("pod %s: address %s not stored, allocation undone: %w", r.pod, d.addr, err)})
		default:
			t.unsure[r.pod] = struct{}{}
			k.noteHeld(r.pod)
			k.metrics.failed.Inc()
			r.answer(reply{err: fmt.Errorf("pod %s: address %s: %w: %w", r.pod, d.addr, errUnknownOutcome, err)})
		}
	}})
	r.decided(reply{addr: d.addr})
}

// errUnknownOutcome wraps the error of a write whose outcome could not be
// read back.
var errUnknownOutcome = errors.New("the store's outcome is unknown and could not be read back, so the address stays reserved for the pod")

// release adds the delete of the pod's record to b; the address is free
// only once the delete is durable.
func (k *keeper) release(r *request, b *batch) {
	t := k.tab
	a, ok := t.lookup(r.pod)
	if !ok {
		r.answer(reply{})
		return
	}
	b.add(write{op: kvdb.DeleteOp(podKey(r.pod)), done: func(o outcome, err error) {
		switch o {
		case durable:
			t.drop(r.pod)
			delete(k.absent, r.pod)
			delete(k.young, r.pod)
			if k.log.Enabled(context.Background(), slog.LevelDebug) {
				k.log.Debug("pod IP released", "pod", r.pod.String(), "ip", a.String())
			}
			r.answer(reply{addr: a, held: true})
		case failed:
			r.answer(reply{addr: a, held: true, err: fmt.Errorf("pod %s: address %s not released: its record could not be deleted: %w", r.pod, a, err)})
		default:
			t.unsure[r.pod] = struct{}{}
			r.answer(reply{addr: a, held: true, err: fmt.Errorf("pod %s: address %s not released: %w: %w", r.pod, a, errUnknownOutcome, err)})
		}
	}})
	r.decided(reply{addr: a, held: true})
}

// seen notes a pod of the Kubernetes state: it is not absent.
func (k *keeper) seen(id podmodel.ID) {
	if k.view.pods == nil {
		k.view.pods = map[podmodel.ID]struct{}{}
	}
	k.view.pods[id] = struct{}{}
	delete(k.absent, id)
}

// gone notes a pod deleted from the Kubernetes state.
func (k *keeper) gone(id podmodel.ID) {
	delete(k.view.pods, id)
	delete(k.absent, id)
}

// noteHeld starts the grace period of a held pod that the live
// Kubernetes state does not have.
func (k *keeper) noteHeld(id podmodel.ID) {
	if !k.view.live {
		return
	}
	if _, ok := k.view.pods[id]; ok {
		return
	}
	if _, ok := k.absent[id]; !ok {
		k.absent[id] = k.clock.Now()
	}
}

// podKey is the store key of the pod's allocation.
func podKey(id podmodel.ID) string { return AllocationPrefix + id.Namespace + "/" + id.Name }
