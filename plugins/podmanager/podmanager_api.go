package podmanager

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// ContainerNamespace is the pod namespace of a plain container, called
// without K8S_POD_NAME and K8S_POD_NAMESPACE in CNI_ARGS: its pod ID is
// {ContainerNamespace, <container ID>}. The underscore makes it an invalid
// Kubernetes namespace, so it never clashes with a real pod, and IPAM
// never reconciles such pods with the Kubernetes state.
const ContainerNamespace = "_container"

// Errors a handler wraps so that podmanager answers the CNI call with the
// right code (see cni/codes.go); errors wrapping ipalloc.ErrPoolExhausted
// get cni.CodePoolExhausted, any other error cni.CodeInternal.
var (
	// ErrTryAgain: the agent cannot serve the call yet (no node ID, no
	// pod subnet): cni.CodeTryAgainLater.
	ErrTryAgain = errors.New("the agent is not ready, try again later")
	// ErrBadRequest: the call cannot be served as given (a bad external
	// IPAM result, a bad argument): cni.CodeBadRequest.
	ErrBadRequest = errors.New("bad CNI request")
)

// AttachmentKey is the CNI primary key of an attachment: (network name,
// CNI_CONTAINERID, CNI_IFNAME). IPAM keys its allocations by it.
type AttachmentKey struct {
	Network     string
	ContainerID string
	IfName      string
}

// String is "network/containerID/ifname".
func (k AttachmentKey) String() string {
	return k.Network + "/" + k.ContainerID + "/" + k.IfName
}

// LocalPod is a pod connected on this node.
type LocalPod struct {
	ID podmodel.ID
	// UID is K8S_POD_UID of its ADD ("" when it had none).
	UID              string
	ContainerID      string
	NetworkNamespace string
	// Attachments are the keys the pod's container was added with.
	Attachments []AttachmentKey
}

// LocalPods are the pods connected on this node, by pod ID.
type LocalPods map[podmodel.ID]*LocalPod

// API is what podmanager offers other plugins.
type API interface {
	// GetLocalPods returns a copy of the pods connected on this node.
	GetLocalPods() LocalPods
}

// IPAM is what podmanager needs of the IPAM plugin outside the event
// loop (CHECK and STATUS read; they change nothing).
type IPAM interface {
	// AttachmentIPs returns the addresses the key holds (one per address
	// family of the node), false when none.
	AttachmentIPs(key AttachmentKey) ([]netip.Prefix, bool, error)
	// FreeAddresses is the number of pod addresses still free; an error
	// when IPAM cannot allocate at all (not ready).
	FreeAddresses() (uint64, error)
	// ConfirmAttachment confirms the reservation an ADD of key returned
	// (AddPod.Reservation): the address stops expiring. It returns once
	// the confirmation is durable. A reservation that does not match the
	// key's (expired, replaced by a later ADD, or never made) is an error
	// wrapping ErrBadRequest; the key holds no address any more, or
	// another reservation, and the ADD must fail.
	ConfirmAttachment(ctx context.Context, key AttachmentKey, reservation string) error
}

// Pending waits until the outcome of a change decided in a handler is
// known (a record durable in the store): nil when it is, the error
// otherwise, ctx.Err() when ctx ends first.
type Pending func(ctx context.Context) error

// pendings collects the Pendings of one event; the handlers add them in
// the loop, podmanager waits for them after the event is done.
type pendings struct {
	mu   sync.Mutex
	list []Pending
}

// Await adds p: the reply to the CNI call waits for it.
func (ps *pendings) Await(p Pending) {
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
}

// Wait waits for every Pending added; the first error wins.
func (ps *pendings) Wait(ctx context.Context) error {
	ps.mu.Lock()
	list := append([]Pending(nil), ps.list...)
	ps.mu.Unlock()
	var first error
	for _, p := range list {
		if err := p(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// IPWithGateway is one address of a pod interface.
type IPWithGateway struct {
	Address netip.Prefix // the pod address with the pod subnet's length
	Gateway netip.Addr
}

// PodInterface is one interface of the reply.
type PodInterface struct {
	Name        string
	Sandbox     string
	IPAddresses []IPWithGateway
}

// Route is one route of the reply.
type Route struct {
	Dst netip.Prefix
	Gw  netip.Addr
}

// AddPodName is the name of AddPod events.
const AddPodName = "Add Pod"

// AddPod is pushed for a CNI ADD. It is a blocking Update with
// RevertOnFailure, in Forward order. Handlers fill the outputs and Await
// what the reply must wait for (IPAM: the allocation's record).
type AddPod struct {
	pendings
	result chan error

	// Inputs.
	Pod podmodel.ID
	// PodUID is K8S_POD_UID of CNI_ARGS ("" when the caller gave none):
	// the pod's identity, which a pod re-created under the same name does
	// not share.
	PodUID           string
	Key              AttachmentKey
	NetworkNamespace string
	IPAMType         string
	IPAMData         string
	// Confirms: the client confirms the reservation of the reply
	// (IPAM.ConfirmAttachment) once the interface is configured; IPAM
	// reserves the addresses only then (an older client never confirms).
	Confirms bool
	// Ctx is the CNI caller's context (nil: none). Once it has ended the
	// event must not be applied: IPAM drops an AddPod whose caller gave up
	// before it was decided, so that it never allocates after the DEL the
	// runtime sends next.
	Ctx context.Context

	// Outputs.
	Interfaces []PodInterface
	Routes     []Route
	// Reservation is the ID of the expiring reservation IPAM made for
	// the key ("" when the addresses need no confirmation): contiv-cni
	// confirms it (IPAM.ConfirmAttachment) once the interface is
	// configured; unconfirmed, the addresses are released at the
	// reservation's deadline.
	Reservation string
}

// NewAddPod returns an AddPod ready to push.
func NewAddPod() *AddPod { return &AddPod{result: make(chan error, 1)} }

var _ api.UpdateEvent = (*AddPod)(nil)

// GetName returns "Add Pod".
func (ev *AddPod) GetName() string { return AddPodName }

// String names the pod and the key.
func (ev *AddPod) String() string {
	return fmt.Sprintf("%s %s (%s, netns %s)", AddPodName, ev.Pod, ev.Key, ev.NetworkNamespace)
}

// Method is Update.
func (ev *AddPod) Method() api.EventMethodType { return api.Update }

// TransactionType is RevertOnFailure.
func (ev *AddPod) TransactionType() api.UpdateTransactionType { return api.RevertOnFailure }

// Direction is Forward.
func (ev *AddPod) Direction() api.UpdateDirectionType { return api.Forward }

// IsBlocking is true.
func (ev *AddPod) IsBlocking() bool { return true }

// Done passes the loop's outcome to Wait.
func (ev *AddPod) Done(err error) { ev.result <- err }

// WaitDone waits for the loop to finish the event.
func (ev *AddPod) WaitDone(ctx context.Context) error { return waitResult(ctx, ev.result) }

// DeletePodName is the name of DeletePod events.
const DeletePodName = "Delete Pod"

// DeletePod is pushed for a CNI DEL, and before the AddPod of a pod seen
// with another container (Contiv's obsolete pod configuration). It is a
// blocking Update with BestEffortIgnoreErrors, in Reverse order.
type DeletePod struct {
	pendings
	result chan error

	Pod              podmodel.ID
	Key              AttachmentKey
	NetworkNamespace string
	// Ctx is the CNI caller's context (nil: none): a DeletePod whose
	// caller gave up before it was decided is dropped (the runtime
	// repeats a failed DEL), so that it never releases an attachment
	// added again after it.
	Ctx context.Context
}

// NewDeletePod returns a DeletePod ready to push.
func NewDeletePod() *DeletePod { return &DeletePod{result: make(chan error, 1)} }

var _ api.UpdateEvent = (*DeletePod)(nil)

// GetName returns "Delete Pod".
func (ev *DeletePod) GetName() string { return DeletePodName }

// String names the pod and the key.
func (ev *DeletePod) String() string {
	return fmt.Sprintf("%s %s (%s)", DeletePodName, ev.Pod, ev.Key)
}

// Method is Update.
func (ev *DeletePod) Method() api.EventMethodType { return api.Update }

// TransactionType is BestEffortIgnoreErrors.
func (ev *DeletePod) TransactionType() api.UpdateTransactionType {
	return api.BestEffortIgnoreErrors
}

// Direction is Reverse.
func (ev *DeletePod) Direction() api.UpdateDirectionType { return api.Reverse }

// IsBlocking is true.
func (ev *DeletePod) IsBlocking() bool { return true }

// Done passes the loop's outcome to Wait.
func (ev *DeletePod) Done(err error) { ev.result <- err }

// WaitDone waits for the loop to finish the event.
func (ev *DeletePod) WaitDone(ctx context.Context) error { return waitResult(ctx, ev.result) }

// GCPodsName is the name of GCPods events.
const GCPodsName = "GC Pods"

// GCPods is pushed for a CNI GC: every attachment of Network not listed in
// Valid is released. It is a blocking Update with BestEffort.
type GCPods struct {
	pendings
	result chan error

	Network string
	Valid   []AttachmentKey
}

// NewGCPods returns a GCPods ready to push.
func NewGCPods() *GCPods { return &GCPods{result: make(chan error, 1)} }

var _ api.UpdateEvent = (*GCPods)(nil)

// GetName returns "GC Pods".
func (ev *GCPods) GetName() string { return GCPodsName }

// String names the network and the number of valid attachments.
func (ev *GCPods) String() string {
	return fmt.Sprintf("%s of network %q (%d valid attachments)", GCPodsName, ev.Network, len(ev.Valid))
}

// Method is Update.
func (ev *GCPods) Method() api.EventMethodType { return api.Update }

// TransactionType is BestEffort.
func (ev *GCPods) TransactionType() api.UpdateTransactionType { return api.BestEffort }

// Direction is Forward.
func (ev *GCPods) Direction() api.UpdateDirectionType { return api.Forward }

// IsBlocking is true.
func (ev *GCPods) IsBlocking() bool { return true }

// Done passes the loop's outcome to Wait.
func (ev *GCPods) Done(err error) { ev.result <- err }

// WaitDone waits for the loop to finish the event.
func (ev *GCPods) WaitDone(ctx context.Context) error { return waitResult(ctx, ev.result) }

func waitResult(ctx context.Context, ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
