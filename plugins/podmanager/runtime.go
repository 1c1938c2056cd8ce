package podmanager

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	cri "k8s.io/cri-client/pkg"

	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
)

// Sandbox is a pod sandbox the node's container runtime holds.
type Sandbox struct {
	// ID is the sandbox's ID: the CNI_CONTAINERID of its attachments.
	ID  string
	Pod podmodel.ID
	UID string
	// Ready: the sandbox runs (NOTREADY ones still hold their network
	// until the runtime removes them).
	Ready bool
}

// Runtime lists the pod sandboxes of the node's container runtime.
type Runtime interface {
	// ListSandboxes returns every sandbox, ready or not; an error when
	// the runtime cannot be asked (ctx bounds the call).
	ListSandboxes(ctx context.Context) ([]Sandbox, error)
}

// RuntimeWitness is what IPAM offers when the runtime is a witness of
// its pods (see runtimeLoop): Deps.IPAM may implement it.
type RuntimeWitness interface {
	// UseRuntime makes the runtime a witness of the pods; gcPeriod > 0
	// also releases what two of its lists a period apart lack. Called
	// from Init, before IPAM starts.
	UseRuntime(gcPeriod time.Duration) error
	// LookAtRuntime takes one list with list (IPAM notes when it began)
	// and acts on it; it returns once what it released is durable.
	LookAtRuntime(ctx context.Context, list func(context.Context) ([]Sandbox, error)) error
}

// criRuntime asks a CRI runtime service (containerd, CRI-O) over its
// socket with the official CRI client. The connection is made at the
// first call that finds the runtime up (the client checks the runtime's
// version when it connects), and kept.
type criRuntime struct {
	endpoint string
	timeout  time.Duration

	mu  sync.Mutex // guards svc
	svc internalapi.RuntimeService
}

// criEndpoint makes a socket path a CRI endpoint ("unix:///path");
// an endpoint with a scheme is kept.
func criEndpoint(socket string) string {
	if strings.Contains(socket, "://") {
		return socket
	}
	return "unix://" + socket
}

func newCRIRuntime(socket string, timeout time.Duration) *criRuntime {
	return &criRuntime{endpoint: criEndpoint(socket), timeout: timeout}
}

func (r *criRuntime) service(ctx context.Context) (internalapi.RuntimeService, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.svc != nil {
		return r.svc, nil
	}
	svc, err := cri.NewRemoteRuntimeService(ctx, r.endpoint, r.timeout, nil, false)
	if err != nil {
		return nil, fmt.Errorf("connecting to the container runtime at criSocket %q: %w", r.endpoint, err)
	}
	r.svc = svc
	return svc, nil
}

// ListSandboxes lists every pod sandbox of the runtime, bounded by
// criTimeout and ctx.
func (r *criRuntime) ListSandboxes(ctx context.Context) ([]Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	svc, err := r.service(ctx)
	if err != nil {
		return nil, err
	}
	list, err := svc.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the pod sandboxes of the container runtime at criSocket %q: %w", r.endpoint, err)
	}
	out := make([]Sandbox, 0, len(list))
	for _, s := range list {
		m := s.GetMetadata()
		out = append(out, Sandbox{ID: s.GetId(), Pod: podmodel.ID{Name: m.GetName(), Namespace: m.GetNamespace()},
			UID: m.GetUid(), Ready: s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY})
	}
	return out, nil
}

// close ends the connection, if any.
func (r *criRuntime) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.svc == nil {
		return nil
	}
	return r.svc.Close(context.Background())
}
