package checkpoint

import "time"

// Version is the version stamp of the documents this code writes.
// Versions it reads: VersionV1 (migrated on Decode) and Version.
const (
	Version   = "contiv-ipam/2"
	VersionV1 = "contiv-ipam/1"
)

// Data is a checkpoint: every allocation of one node's IPAM, in a plain
// JSON form meant to stay readable across agent versions.
type Data struct {
	Version string `json:"version"`
	// Node is the node the checkpoint was taken on (for the operator;
	// an import on another node is allowed).
	Node string `json:"node,omitempty"`
	// TakenAt is when the checkpoint was taken.
	TakenAt     time.Time `json:"takenAt"`
	Allocations []Entry   `json:"allocations"`
}

// Entry is one allocation. Exactly one of the three keys is set: a CNI
// attachment (Network, ContainerID, IfName, with its Pod), a pod-keyed
// allocation (Pod alone), or an owner's (Owner, Seq).
type Entry struct {
	Network     string `json:"network,omitempty"`
	ContainerID string `json:"containerId,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	Pod         *Pod   `json:"pod,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Seq         uint64 `json:"seq,omitempty"`
	// IPs are the addresses, one per family (the first is the primary
	// family's when the allocation has one).
	IPs []string `json:"ips"`
	// Pools are the pod subnets the IPs were handed out from, in the
	// order of IPs.
	Pools []string `json:"pools,omitempty"`
	// AllocatedAt is when the allocation was made (zero when unknown:
	// addresses learned from Kubernetes, records older than the field).
	AllocatedAt time.Time `json:"allocatedAt,omitzero"`
	// Reservation is set while the allocation awaits its confirmation.
	Reservation *Reservation `json:"reservation,omitempty"`
	// Metadata is free-form, for the operator (not interpreted).
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Pod names a pod.
type Pod struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// Reservation is an expiring reservation: its ID and deadline.
type Reservation struct {
	ID       string    `json:"id"`
	Deadline time.Time `json:"deadline"`
}
