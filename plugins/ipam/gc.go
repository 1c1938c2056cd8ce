package ipam

import (
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// reqGC asks the keeper to release the attachments of a network that a
// CNI GC does not list as valid. It touches the records of many pods, so
// the keeper serves it like a resync: after the writes in flight.
const reqGC reqKind = 100

// gcInput is what a GC names: the network, and its valid attachments.
type gcInput struct {
	network string
	valid   map[podmanager.AttachmentKey]struct{}
}

// newGCInput collects the valid attachments of ev; keys of other networks
// are ignored.
func newGCInput(ev *podmanager.GCPods) *gcInput {
	in := &gcInput{network: ev.Network, valid: make(map[podmanager.AttachmentKey]struct{}, len(ev.Valid))}
	for _, k := range ev.Valid {
		if k.Network == ev.Network {
			in.valid[k] = struct{}{}
		}
	}
	return in
}

// garbage lists the attachment-keyed allocations of the network that are
// not valid, in a stable order; pod-keyed allocations are never garbage.
func (t *table) garbage(in *gcInput) []allocKey {
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
