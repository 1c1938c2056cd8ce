package controller

import (
	"errors"
	"sync/atomic"

	"github.com/contiv-ipam/agent/plugins/controller/api"
)

// LoopRef is an api.EventLoop for the event handlers of a controller that
// does not exist yet: it forwards every push to the controller built with
// UseLoopRef(ref). It breaks the cycle "the controller calls the handlers,
// the handlers push events into the controller" at construction, without
// assigning any field afterwards.
type LoopRef struct {
	p atomic.Pointer[Plugin]
}

var _ api.EventLoop = (*LoopRef)(nil)

// errUnbound is returned by a LoopRef no controller was built with.
var errUnbound = errors.New("event loop reference is not bound to a controller (build it with controller.UseLoopRef)")

// PushEvent forwards to the bound controller.
func (r *LoopRef) PushEvent(ev api.Event) error {
	p := r.p.Load()
	if p == nil {
		return errUnbound
	}
	return p.PushEvent(ev)
}

// UseLoopRef binds ref to the controller being built.
func UseLoopRef(ref *LoopRef) Option {
	return func(p *Plugin) { ref.p.Store(p) }
}
