package keeper

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// allocKey identifies one allocation (see doc.go, "Allocation identity").
// An attachment-keyed allocation has att set and pod zero; a pod-keyed one
// (the old pod-ID API, addresses learned from Kubernetes, migrated v1
// records) has att zero and pod set. The pod of an attachment-keyed
// allocation is kept beside it in the table.
//
// An owner-keyed allocation (the Cilium-style API: AllocateNext,
// AllocateIP with an owner name) has seq set (1, 2, ... in the order they
// were made) and pod {OwnerNamespace, owner name}; an exclusion
// (exclusion.go, never stored) has seq set and pod {excludedNamespace,
// owner}.
type allocKey struct {
	att podmanager.AttachmentKey
	pod podmodel.ID
	seq uint64
}

// OwnerNamespace is the pod namespace of the owner-keyed allocations:
// the pod ID of owner "x" is {OwnerNamespace, "x"}. The underscore makes
// it an invalid Kubernetes namespace: an owner is never a pod, and such
// allocations are never reconciled with the Kubernetes state.
const OwnerNamespace = "_owner"

// excludedNamespace is the pod namespace of the exclusions.
const excludedNamespace = "_excluded"

// ownerKeyOf is the key of owner-keyed allocation seq of owner.
func ownerKeyOf(owner string, seq uint64) allocKey {
	return allocKey{pod: podmodel.ID{Namespace: OwnerNamespace, Name: owner}, seq: seq}
}

// ownerKeyed tells whether k is an owner-keyed allocation (or an
// exclusion).
func (k allocKey) ownerKeyed() bool { return k.seq != 0 }

// excluded tells whether k is an exclusion.
func (k allocKey) excluded() bool { return k.seq != 0 && k.pod.Namespace == excludedNamespace }

// podKeyOf is the key of the pod-keyed allocation of id.
func podKeyOf(id podmodel.ID) allocKey { return allocKey{pod: id} }

// attKeyOf is the key of the allocation of an attachment.
func attKeyOf(k podmanager.AttachmentKey) allocKey { return allocKey{att: k} }

// podKeyed tells whether k is a pod-keyed allocation.
func (k allocKey) podKeyed() bool { return k.att == podmanager.AttachmentKey{} && k.seq == 0 }

// attachment tells whether k is the allocation of a CNI attachment.
func (k allocKey) attachment() bool { return k.att != podmanager.AttachmentKey{} }

// String names the allocation in logs and errors.
func (k allocKey) String() string {
	if k.excluded() {
		return fmt.Sprintf("exclusion %d of %q", k.seq, k.pod.Name)
	}
	if k.ownerKeyed() {
		return fmt.Sprintf("owner %q allocation %d", k.pod.Name, k.seq)
	}
	if k.podKeyed() {
		return "pod " + k.pod.String()
	}
	return "attachment " + k.att.String()
}

// storeKey is the bolt key of the allocation's record.
func (k allocKey) storeKey() string {
	if k.ownerKeyed() {
		return OwnerPrefix + url.PathEscape(k.pod.Name) + "/" + strconv.FormatUint(k.seq, 10)
	}
	if k.podKeyed() {
		return podKey(k.pod)
	}
	return attachmentKey(k.att)
}

// compareKeys orders allocations: pod-keyed first by pod, then by the
// attachment key's fields.
func compareKeys(a, b allocKey) int {
	return cmp.Or(comparePods(a.pod, b.pod), cmp.Compare(a.seq, b.seq), strings.Compare(a.att.Network, b.att.Network),
		strings.Compare(a.att.ContainerID, b.att.ContainerID), strings.Compare(a.att.IfName, b.att.IfName))
}

// AttachmentPrefix is the bolt key prefix of the attachment-keyed
// allocations: AttachmentPrefix + "<network>/<containerID>/<ifname>",
// each part escaped with url.PathEscape, -> JSON (attachmentRecord).
const AttachmentPrefix = "/contiv-agent/ipam/attachments/"

// attachmentKey is the store key of an attachment's record.
func attachmentKey(k podmanager.AttachmentKey) string {
	return AttachmentPrefix + url.PathEscape(k.Network) + "/" + url.PathEscape(k.ContainerID) + "/" + url.PathEscape(k.IfName)
}

// CheckAttachment refuses keys that cannot name an attachment: every part
// is required, and the store key must fit kvdb.MaxKeyLen. The error wraps
// podmanager.ErrBadRequest and names the field and the value.
func CheckAttachment(k podmanager.AttachmentKey) error {
	for _, f := range []struct{ name, value string }{
		{"network", k.Network}, {"container ID", k.ContainerID}, {"interface name", k.IfName},
	} {
		if f.value == "" {
			return fmt.Errorf("attachment %q: the %s is empty: %w", k.String(), f.name, podmanager.ErrBadRequest)
		}
	}
	if n := len(attachmentKey(k)); n > kvdb.MaxKeyLen {
		return fmt.Errorf("attachment %.60q...: its store key is %d bytes, more than %d: %w", k.String(), n, kvdb.MaxKeyLen, podmanager.ErrBadRequest)
	}
	return nil
}

// recordPod names the pod in a stored record.
type recordPod struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// UID is K8S_POD_UID of the ADD (absent when it had none, and in
	// older records).
	UID string `json:"uid,omitempty"`
}

// attachmentRecord is the stored value of an attachment-keyed allocation.
// IP is the first address (v2 readers see it); IPs lists every address
// when there are several (dual-stack, schema v3); Reservation is set
// while the allocation awaits its confirmation.
type attachmentRecord struct {
	IP          string             `json:"ip"`
	IPs         []string           `json:"ips,omitempty"`
	Pod         recordPod          `json:"pod"`
	Network     string             `json:"network"`
	ContainerID string             `json:"containerId"`
	IfName      string             `json:"ifName"`
	Reservation *reservationRecord `json:"reservation,omitempty"`
	// At is when the allocation was made (absent in older records).
	At time.Time `json:"at,omitzero"`
}

// OwnerPrefix is the bolt key prefix of the owner-keyed allocations (the
// Cilium-style API): OwnerPrefix + "<owner>/<seq>" (the owner escaped
// with url.PathEscape) -> JSON (ownerRecord).
const OwnerPrefix = "/contiv-agent/ipam/owners/"

// ownerRecord is the stored value of an owner-keyed allocation.
type ownerRecord struct {
	Owner       string             `json:"owner"`
	Seq         uint64             `json:"seq"`
	IPs         []string           `json:"ips"`
	Reservation *reservationRecord `json:"reservation,omitempty"`
	At          time.Time          `json:"at,omitzero"`
}

// reservationRecord is a stored reservation: its ID and deadline.
type reservationRecord struct {
	ID       string    `json:"id"`
	Deadline time.Time `json:"deadline"`
}

// recordOf is the stored value of allocation k with its reservation
// (nil: confirmed or none) and the time it was made.
func (t *table) recordOf(k allocKey, pod podmodel.ID, as Addrs, rv *reservation) []byte {
	return recordValue(k, podRef{pod, t.uids[k]}, as, rv, t.born[k])
}

// podRef is a pod and its UID ("" when unknown).
type podRef struct {
	id  podmodel.ID
	uid string
}

// recordValue is the stored value of an allocation with its
// reservation (nil: confirmed or none) and the time it was made (zero:
// unknown; a pod-keyed record has no room for it).
func recordValue(k allocKey, ref podRef, as Addrs, rv *reservation, at time.Time) []byte {
	pod := ref.id
	var rr *reservationRecord
	if rv != nil {
		rr = &reservationRecord{ID: rv.id, Deadline: rv.deadline.UTC()}
	}
	ips := make([]string, 0, 2)
	for _, a := range as.List() {
		ips = append(ips, a.String())
	}
	switch {
	case k.ownerKeyed():
		v, _ := json.Marshal(ownerRecord{Owner: k.pod.Name, Seq: k.seq, IPs: ips, Reservation: rr, At: at.UTC()})
		return v
	case k.podKeyed():
		return []byte(as.String())
	}
	v := attachmentRecord{IP: ips[0], Pod: recordPod{Name: pod.Name, Namespace: pod.Namespace, UID: ref.uid},
		Network: k.att.Network, ContainerID: k.att.ContainerID, IfName: k.att.IfName, Reservation: rr, At: at.UTC()}
	if len(ips) > 1 {
		v.IPs = ips
	}
	b, _ := json.Marshal(v)
	return b
}

// parseAttachment decodes one attachment record; the key and the value
// must agree on the attachment.
func parseAttachment(key string, value []byte) (record, error) {
	var v attachmentRecord
	if err := json.Unmarshal(value, &v); err != nil {
		return record{}, fmt.Errorf("key %q: value %.80q: not an attachment record: %w", key, value, err)
	}
	att := podmanager.AttachmentKey{Network: v.Network, ContainerID: v.ContainerID, IfName: v.IfName}
	if err := CheckAttachment(att); err != nil {
		return record{}, fmt.Errorf("key %q: %w", key, err)
	}
	if attachmentKey(att) != key {
		return record{}, fmt.Errorf("key %q: the value names attachment %q, stored under %q", key, att.String(), attachmentKey(att))
	}
	pod := podmodel.ID{Name: v.Pod.Name, Namespace: v.Pod.Namespace}
	if err := CheckPodID(pod); err != nil {
		return record{}, fmt.Errorf("key %q: %w", key, err)
	}
	list := v.IPs
	if len(list) == 0 {
		list = []string{v.IP}
	}
	ips, err := parseIPs(key, list)
	if err != nil {
		return record{}, err
	}
	return record{key: attKeyOf(att), pod: pod, uid: v.Pod.UID, ips: ips, resv: parseReservation(v.Reservation), at: v.At}, nil
}

// parseOwner decodes one owner-keyed record.
func parseOwner(key string, value []byte) (record, error) {
	var v ownerRecord
	if err := json.Unmarshal(value, &v); err != nil {
		return record{}, fmt.Errorf("key %q: value %.80q: not an owner record: %w", key, value, err)
	}
	k := ownerKeyOf(v.Owner, v.Seq)
	if v.Owner == "" || v.Seq == 0 || k.storeKey() != key {
		return record{}, fmt.Errorf("key %q: the value names owner %q allocation %d", key, v.Owner, v.Seq)
	}
	ips, err := parseIPs(key, v.IPs)
	if err != nil {
		return record{}, err
	}
	return record{key: k, pod: k.pod, ips: ips, resv: parseReservation(v.Reservation), at: v.At}, nil
}

// parseIPs parses a record's addresses: one or two, of different
// families.
func parseIPs(key string, list []string) ([]netip.Addr, error) {
	if len(list) == 0 || len(list) > 2 {
		return nil, fmt.Errorf("key %q: %d addresses, want 1 or 2", key, len(list))
	}
	out := make([]netip.Addr, 0, len(list))
	for _, s := range list {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("key %q: ip %q: not an IP address", key, s)
		}
		out = append(out, a.Unmap())
	}
	if len(out) == 2 && out[0].Is4() == out[1].Is4() {
		return nil, fmt.Errorf("key %q: addresses %s and %s are of one family", key, out[0], out[1])
	}
	return out, nil
}

// parseReservation converts a stored reservation (nil: none).
func parseReservation(rr *reservationRecord) *reservation {
	if rr == nil || rr.ID == "" {
		return nil
	}
	return &reservation{id: rr.ID, deadline: rr.Deadline}
}

// sortKeys orders keys by compareKeys.
func sortKeys(keys []allocKey) { slices.SortFunc(keys, compareKeys) }

// AllocationPrefix is the bolt key prefix of the pod allocations:
// AllocationPrefix + "<namespace>/<name>" -> the address.
const AllocationPrefix = "/contiv-agent/ipam/pods/"

// CheckPodID refuses IDs that cannot be a Kubernetes pod's.
func CheckPodID(id podmodel.ID) error {
	if id.Name == "" || id.Namespace == "" || strings.Contains(id.Name, "/") || strings.Contains(id.Namespace, "/") {
		return fmt.Errorf("pod ID %q: want a name and a namespace without '/'", id.String())
	}
	return nil
}

// PodName names a pod in REST replies.
type PodName struct {
	Name      string `json:"Name"`
	Namespace string `json:"Namespace"`
}
