package keeper

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/contiv-ipam/agent/infra/kvdb"
	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/checkpoint"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// ErrNotEmpty: an import without replace on a node that holds
// allocations.
var ErrNotEmpty = errors.New("the node holds allocations: import with replace to drop them")

// ImportResult counts what an import did.
type ImportResult struct {
	Imported       int
	Skipped        int
	SkippedReasons []string
}

// ExportCheckpoint returns every allocation of this node: taken as a
// barrier on the keeper, so with nothing in flight (the table is what the
// store holds, but for writes of unknown outcome, which are exported as
// held).
func (k *Keeper) ExportCheckpoint() (checkpoint.Data, error) {
	d := checkpoint.Data{Version: checkpoint.Version}
	err := k.exec(func(t *table, _ *batch) error {
		d.Node, d.TakenAt = t.st.NodeName, k.clock.Now().UTC()
		t.each(func(k allocKey, pod podmodel.ID, as Addrs) bool {
			d.Allocations = append(d.Allocations, t.entryOf(k, pod, as))
			return true
		})
		return nil
	})
	return d, err
}

// entryOf is the checkpoint entry of one allocation.
func (t *table) entryOf(k allocKey, pod podmodel.ID, as Addrs) checkpoint.Entry {
	e := checkpoint.Entry{AllocatedAt: t.born[k].UTC()}
	for _, a := range as {
		if b, _, ok := t.blockOf(a); ok {
			e.IPs = append(e.IPs, a.String())
			e.Pools = append(e.Pools, b.prefix.String())
		}
	}
	switch {
	case k.ownerKeyed():
		e.Owner, e.Seq = k.pod.Name, k.seq
	case k.podKeyed():
		e.Pod = &checkpoint.Pod{Name: pod.Name, Namespace: pod.Namespace}
	default:
		e.Network, e.ContainerID, e.IfName = k.att.Network, k.att.ContainerID, k.att.IfName
		e.Pod = &checkpoint.Pod{Name: pod.Name, Namespace: pod.Namespace}
	}
	if rv, ok := t.resv[k]; ok {
		e.Reservation = &checkpoint.Reservation{ID: rv.id, Deadline: rv.deadline.UTC()}
	}
	return e
}

// ImportCheckpoint restores d on this node as a barrier on the keeper:
// the records of d are stored (with replace, after the deletes of every
// allocation held; without, ErrNotEmpty when there is one), then IPAM
// resyncs with the Kubernetes state of its last resync, as a start would,
// before any other request is served: pods Kubernetes does not have enter
// their grace period, and Kubernetes wins a clash. Entries outside this
// node's pod subnets, or naming a bad key, are skipped and counted.
func (k *Keeper) ImportCheckpoint(d checkpoint.Data, replace bool) (ImportResult, error) {
	var res ImportResult
	err := k.exec(func(t *table, _ *batch) error {
		if t.externalMode() {
			return fmt.Errorf("importing a checkpoint: %w", ErrExternalIPAM)
		}
		if t.len() > 0 && !replace {
			return fmt.Errorf("importing a checkpoint: %d allocations held: %w", t.len(), ErrNotEmpty)
		}
		if k.last == nil {
			return ErrNotReady
		}
		if k.db == nil {
			return errors.New("importing a checkpoint: this agent keeps its allocations in memory only (no LocalDB): nothing to import into")
		}
		ws := k.dropAll(t)
		for i, e := range d.Allocations {
			w, err := importWrite(t, e)
			if err != nil {
				res.Skipped++
				res.SkippedReasons = append(res.SkippedReasons, fmt.Sprintf("allocations[%d]: %v", i, err))
				continue
			}
			ws = append(ws, w)
			res.Imported++
		}
		// A key both held and imported is written, not deleted: one
		// transaction cannot hold two operations on a key.
		if err := k.commitAll(dedupe(ws)); err != nil {
			return fmt.Errorf("importing a checkpoint: storing the records: %w", err)
		}
		k.log.Info("checkpoint imported; resyncing with the Kubernetes state", "from-node", d.Node, "taken-at", d.TakenAt,
			"imported", res.Imported, "skipped", res.Skipped, "replaced", replace)
		return k.resync(k.last)
	})
	return res, err
}

// dropAll lists the deletes of every allocation of t.
func (k *Keeper) dropAll(t *table) []write {
	var ws []write
	t.each(func(key allocKey, _ podmodel.ID, _ Addrs) bool {
		ws = append(ws, write{op: kvdb.DeleteOp(key.storeKey()), done: func(outcome, error) {}})
		return true
	})
	return ws
}

// commitAll stores ws in batches of maxBatch, on the keeper's goroutine
// (nothing is in flight: the caller is a barrier), and returns the first
// error.
func (k *Keeper) commitAll(ws []write) error {
	var errs []error
	for chunk := range slices.Chunk(ws, maxBatch) {
		for i := range chunk {
			done := chunk[i].done
			chunk[i].done = func(o outcome, err error) {
				done(o, err)
				if o != durable {
					errs = append(errs, err)
				}
			}
		}
		k.commit(chunk)
	}
	return errors.Join(errs...)
}

// importWrite is the record of one checkpoint entry, if its key is good
// and its addresses lie in this node's pod subnets.
func importWrite(t *table, e checkpoint.Entry) (write, error) {
	key, pod, err := entryKey(e)
	if err != nil {
		return write{}, err
	}
	var as Addrs
	for _, s := range e.IPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return write{}, fmt.Errorf("ip %q: not an IP address", s)
		}
		a = a.Unmap()
		i, ok := t.slotOf(a)
		if !ok || !t.inPool(a) || as[i].IsValid() {
			return write{}, fmt.Errorf("ip %s: not in a pod subnet of this node (%s)", a, addressing.DescribeCIDRs(t.st.PodSubnets()))
		}
		as[i] = a
	}
	if !as.First().IsValid() {
		return write{}, errors.New("no address")
	}
	var rv *reservation
	if e.Reservation != nil {
		rv = &reservation{id: e.Reservation.ID, deadline: e.Reservation.Deadline}
	}
	return write{op: kvdb.PutOp(key.storeKey(), recordValue(key, podRef{id: pod}, as, rv, e.AllocatedAt)), done: func(outcome, error) {}}, nil
}

// entryKey is the allocation key of a checkpoint entry and its pod.
func entryKey(e checkpoint.Entry) (allocKey, podmodel.ID, error) {
	var pod podmodel.ID
	if e.Pod != nil {
		pod = podmodel.ID{Name: e.Pod.Name, Namespace: e.Pod.Namespace}
	}
	switch {
	case e.Owner != "":
		if err := CheckOwner(e.Owner); err != nil {
			return allocKey{}, pod, fmt.Errorf("owner %.80q %w", e.Owner, err)
		}
		if e.Seq == 0 {
			return allocKey{}, pod, fmt.Errorf("owner %.80q: seq 0: want the allocation's sequence number (1, 2, ...)", e.Owner)
		}
		k := ownerKeyOf(e.Owner, e.Seq)
		return k, k.pod, nil
	case e.Network == "" && e.ContainerID == "" && e.IfName == "":
		if err := CheckPodID(pod); err != nil {
			return allocKey{}, pod, err
		}
		return podKeyOf(pod), pod, nil
	}
	att := podmanager.AttachmentKey{Network: e.Network, ContainerID: e.ContainerID, IfName: e.IfName}
	if err := CheckAttachment(att); err != nil {
		return allocKey{}, pod, err
	}
	if err := CheckPodID(pod); err != nil {
		return allocKey{}, pod, err
	}
	return attKeyOf(att), pod, nil
}
