package keeper

import (
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// GCInput is what a GC names: the network, and its valid attachments.
type GCInput struct {
	network string
	valid   map[podmanager.AttachmentKey]struct{}
}

// NewGCInput collects the valid attachments of ev; keys of other networks
// are ignored.
func NewGCInput(ev *podmanager.GCPods) *GCInput {
	in := &GCInput{network: ev.Network, valid: make(map[podmanager.AttachmentKey]struct{}, len(ev.Valid))}
	for _, k := range ev.Valid {
		if k.Network == ev.Network {
			in.valid[k] = struct{}{}
		}
	}
	return in
}

// garbage lists the attachment-keyed allocations of the network that are
// not valid, in a stable order; pod-keyed allocations are never garbage.
func (t *table) garbage(in *GCInput) []allocKey {
	var out []allocKey
	for k := range t.pods {
		if k.att.Network != in.network {
			continue
		}
		if _, ok := in.valid[k.att]; !ok {
			out = append(out, k)
		}
	}
	sortKeys(out)
	return out
}

// gc releases the garbage of in and returns once every delete's outcome
// is known: the number released and the errors of the others. A GC
// touches the records of many pods, so it runs like a resync, as a
// barrier: the keeper serves it through the read path (reqRead), after
// the writes decided before it are durable and with nothing in flight,
// and stores its deletes on its own goroutine (flush).
func (k *Keeper) gc(t *table, in *GCInput) (released int, err error) {
	return k.releaseGarbage(t.garbage(in), ReleaseGC, "released by GC")
}
