package podmanager

import (
	"context"
	"errors"

	"github.com/contiv-ipam/agent/engine/ipalloc"
	"github.com/contiv-ipam/agent/plugins/controller/api"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// Conditions of the server's own answers (see errorCode).
var (
	// errCheckFailed: CHECK found no allocation, or another address.
	errCheckFailed = errors.New("check failed")
	// errNotAvailable: STATUS, the agent cannot serve ADD.
	errNotAvailable = errors.New("the agent cannot serve ADD")
)

// errorCode maps the error of a call to the CNI error code of the reply:
//
//   - errNotAvailable: cni.CodeNotAvailable (50), whatever it wraps;
//   - errCheckFailed: cni.CodeCheckFailed;
//   - ErrBadRequest: cni.CodeBadRequest;
//   - ipalloc.ErrPoolExhausted: cni.CodePoolExhausted;
//   - ErrTryAgain, a deadline (the call took longer than requestTimeout or
//     the client's deadline), a closed event loop (the agent stops) or a
//     full event queue: cni.CodeTryAgainLater (11): nothing was
//     acknowledged, the same call can be repeated;
//   - anything else: cni.CodeInternal.
func errorCode(err error) uint32 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errNotAvailable):
		return cni.CodeNotAvailable
	case errors.Is(err, errCheckFailed):
		return cni.CodeCheckFailed
	case errors.Is(err, ErrBadRequest):
		return cni.CodeBadRequest
	case errors.Is(err, ipalloc.ErrPoolExhausted):
		return cni.CodePoolExhausted
	case errors.Is(err, ErrTryAgain), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, api.ErrClosedController), errors.Is(err, api.ErrEventQueueFull):
		return cni.CodeTryAgainLater
	}
	return cni.CodeInternal
}

// errorReply is the ERROR reply for err: its code and its text.
func errorReply(err error) *cni.CNIReply {
	return &cni.CNIReply{Result: cni.CNIReply_ERROR, Error: err.Error(), ErrorCode: errorCode(err)}
}
