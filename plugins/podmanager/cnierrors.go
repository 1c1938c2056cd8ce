package podmanager

import (
	"time"

	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// CNIFailure is one CNI ADD or DEL answered ERROR, as its client saw it.
type CNIFailure struct {
	Time   time.Time
	Method string // "add" or "delete"
	// Pod is namespace/name from K8S_POD_NAMESPACE and K8S_POD_NAME
	// (ContainerNamespace/<container ID> without them), "" when the
	// request's arguments could not be read.
	Pod         string
	ContainerID string
	IfName      string
	Code        uint32 // the reply's CNI error code
	Message     string // the reply's error text
}

// FailureObserver is an optional capability of Deps.IPAM (found by type
// assertion): it hears every failed ADD and DEL once its reply is built
// (the agent's status page lists the last ones). CNIFailed runs on the
// call's goroutine before the client is answered: it must be quick and
// safe for concurrent use. Values in it come from the client: escape them
// when showing them.
type FailureObserver interface {
	CNIFailed(f CNIFailure)
}

// noteFailure tells Deps.IPAM of an ERROR reply to an Add or Delete of
// req when it is a FailureObserver.
func (p *Plugin) noteFailure(method string, req *cni.CNIRequest, reply *cni.CNIReply) {
	if reply.GetResult() == cni.CNIReply_OK {
		return
	}
	o, ok := p.IPAM.(FailureObserver)
	if !ok {
		return
	}
	f := CNIFailure{Time: time.Now(), Method: method, ContainerID: req.GetContainerId(), IfName: req.GetInterfaceName(),
		Code: reply.GetErrorCode(), Message: reply.GetError()}
	if pod, err := podID(req.GetExtraArguments(), req.GetContainerId()); err == nil {
		f.Pod = pod.String()
	}
	o.CNIFailed(f)
}
