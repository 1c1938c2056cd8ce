package keeper

import (
	"fmt"
	"strings"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Dump maps every allocated address to its owner, one map per family,
// and gives a status one-liner: per family, the addresses held of those
// that can be handed out, the excluded and the reserved (expiring) ones.
// An owner is the owner name of an owner-keyed allocation, the pod
// ("namespace/name") of a pod-keyed one, and the pod and the attachment
// of a CNI allocation.
func (k *Keeper) Dump() (allocv4, allocv6 map[string]string, status string) {
	allocv4, allocv6 = map[string]string{}, map[string]string{}
	status = ErrNotReady.Error()
	k.read(func(t *table) {
		t.each(func(k allocKey, pod podmodel.ID, as Addrs) bool {
			for _, a := range as.List() {
				if a.Is4() {
					allocv4[a.String()] = ownerName(k, pod)
				} else {
					allocv6[a.String()] = ownerName(k, pod)
				}
			}
			return true
		})
		status = t.status()
	})
	return allocv4, allocv6, status
}

// ownerName names the owner of an allocation in Dump.
func ownerName(k allocKey, pod podmodel.ID) string {
	switch {
	case k.ownerKeyed():
		return k.pod.Name
	case k.podKeyed():
		return pod.String()
	}
	return pod.String() + " " + k.att.String()
}

// status is the one-liner of Dump.
func (t *table) status() string {
	var parts []string
	for i, f := range t.st.Families() {
		if t.externalMode() {
			parts = append(parts, fmt.Sprintf("%s: %d from an external IPAM", f.PodThis, t.count(i)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d/%d allocated, %d excluded, %d cooling down", f.PodThis, t.count(i),
			t.size(i)-uint64(t.excludedCount(i)), t.excludedCount(i), t.coolingCount(i)))
	}
	return fmt.Sprintf("%s; %d reservations awaiting confirmation", strings.Join(parts, "; "), len(t.resv))
}
