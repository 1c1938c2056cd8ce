package ipam

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/contiv-ipam/agent/infra/kvdb"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// allocKey identifies one allocation (see doc.go, "Allocation identity").
// An attachment-keyed allocation has att set and pod zero; a pod-keyed one
// (the old pod-ID API, addresses learned from Kubernetes, migrated v1
// records) has att zero and pod set. The pod of an attachment-keyed
// allocation is kept beside it in the table.
type allocKey struct {
	att podmanager.AttachmentKey
	pod podmodel.ID
}

// podKeyOf is the key of the pod-keyed allocation of id.
func podKeyOf(id podmodel.ID) allocKey { return allocKey{pod: id} }

// attKeyOf is the key of the allocation of an attachment.
func attKeyOf(k podmanager.AttachmentKey) allocKey { return allocKey{att: k} }

// podKeyed tells whether k is a pod-keyed allocation.
func (k allocKey) podKeyed() bool { return k.att == podmanager.AttachmentKey{} }

// String names the allocation in logs and errors.
func (k allocKey) String() string {
	if k.podKeyed() {
		return "pod " + k.pod.String()
	}
	return "attachment " + k.att.String()
}

// storeKey is the bolt key of the allocation's record.
func (k allocKey) storeKey() string {
	if k.podKeyed() {
		return podKey(k.pod)
	}
	return attachmentKey(k.att)
}

// compareKeys orders allocations: pod-keyed first by pod, then by the
// attachment key's fields.
func compareKeys(a, b allocKey) int {
	if c := comparePods(a.pod, b.pod); c != 0 {
		return c
	}
	return strings.Compare(a.att.String(), b.att.String())
}

// AttachmentPrefix is the bolt key prefix of the attachment-keyed
// allocations: AttachmentPrefix + "<network>/<containerID>/<ifname>",
// each part escaped with url.PathEscape, -> JSON (attachmentRecord).
const AttachmentPrefix = "/contiv-agent/ipam/attachments/"

// attachmentKey is the store key of an attachment's record.
func attachmentKey(k podmanager.AttachmentKey) string {
	return AttachmentPrefix + url.PathEscape(k.Network) + "/" + url.PathEscape(k.ContainerID) + "/" + url.PathEscape(k.IfName)
}

// checkAttachment refuses keys that cannot name an attachment: every part
// is required, and the store key must fit kvdb.MaxKeyLen. The error wraps
// podmanager.ErrBadRequest and names the field and the value.
func checkAttachment(k podmanager.AttachmentKey) error {
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
}

// attachmentRecord is the stored value of an attachment-keyed allocation.
type attachmentRecord struct {
	IP          string    `json:"ip"`
	Pod         recordPod `json:"pod"`
	Network     string    `json:"network"`
	ContainerID string    `json:"containerId"`
	IfName      string    `json:"ifName"`
}

// encodeAttachment is the stored value of an attachment's allocation.
func encodeAttachment(k podmanager.AttachmentKey, pod podmodel.ID, a netip.Addr) []byte {
	v, _ := json.Marshal(attachmentRecord{IP: a.String(), Pod: recordPod{Name: pod.Name, Namespace: pod.Namespace},
		Network: k.Network, ContainerID: k.ContainerID, IfName: k.IfName})
	return v
}

// recordValue is the stored value of an allocation.
func recordValue(k allocKey, pod podmodel.ID, a netip.Addr) []byte {
	if k.podKeyed() {
		return []byte(a.String())
	}
	return encodeAttachment(k.att, pod, a)
}

// parseAttachment decodes one attachment record; the key and the value
// must agree on the attachment.
func parseAttachment(key string, value []byte) (record, error) {
	var v attachmentRecord
	if err := json.Unmarshal(value, &v); err != nil {
		return record{}, fmt.Errorf("key %q: value %.80q: not an attachment record: %w", key, value, err)
	}
	att := podmanager.AttachmentKey{Network: v.Network, ContainerID: v.ContainerID, IfName: v.IfName}
	if err := checkAttachment(att); err != nil {
		return record{}, fmt.Errorf("key %q: %w", key, err)
	}
	if attachmentKey(att) != key {
		return record{}, fmt.Errorf("key %q: the value names attachment %q, stored under %q", key, att.String(), attachmentKey(att))
	}
	pod := podmodel.ID{Name: v.Pod.Name, Namespace: v.Pod.Namespace}
	if err := checkPodID(pod); err != nil {
		return record{}, fmt.Errorf("key %q: %w", key, err)
	}
	a, err := netip.ParseAddr(v.IP)
	if err != nil {
		return record{}, fmt.Errorf("key %q: ip %q: not an IP address", key, v.IP)
	}
	return record{key: attKeyOf(att), pod: pod, addr: a}, nil
}

// sortKeys orders keys by compareKeys.
func sortKeys(keys []allocKey) { slices.SortFunc(keys, compareKeys) }
