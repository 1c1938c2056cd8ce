package podmanager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contiv-ipam/agent/plugins/controller/api"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager/cni"
)

// maxObsoleteRounds bounds how often one Add deletes an obsolete container
// of its pod and pushes its AddPod again (another Add of the same pod with
// yet another container can win each round).
const maxObsoleteRounds = 3

// errShuttingDown ends the calls in flight when the plugin closes.
var errShuttingDown = fmt.Errorf("%w: the agent is shutting down", ErrTryAgain)

// server implements cni.RemoteCNIServer on top of the plugin.
type server struct {
	cni.UnimplementedRemoteCNIServer
	p *Plugin
}

var _ cni.RemoteCNIServer = (*server)(nil)

// blockingEvent is an event whose handlers may add Pendings.
type blockingEvent interface {
	api.Event
	Wait(ctx context.Context) error
}

// Add connects a container: see the package doc.
func (s *server) Add(ctx context.Context, req *cni.CNIRequest) (*cni.CNIReply, error) {
	reply, err := s.p.call(ctx, methodAdd, func(ctx context.Context) (*cni.CNIReply, error) {
		at, err := parseRequest(req)
		if err == nil {
			err = checkNames(at.key)
		}
		if err != nil {
			return nil, err
		}
		return s.p.add(ctx, at, req)
	})
	s.p.noteFailure(methodAdd, req, reply)
	return reply, err
}

// Delete releases the key's address; an unknown key is OK.
func (s *server) Delete(ctx context.Context, req *cni.CNIRequest) (*cni.CNIReply, error) {
	reply, err := s.p.call(ctx, methodDelete, func(ctx context.Context) (*cni.CNIReply, error) {
		at, err := parseRequest(req)
		if err != nil {
			return nil, err
		}
		return okReply(), s.p.deletePod(ctx, at.pod, at.key, at.netns)
	})
	s.p.noteFailure(methodDelete, req, reply)
	return reply, err
}

// Check verifies that the key holds an address (one of prev_ips if set).
func (s *server) Check(ctx context.Context, req *cni.CNIRequest) (*cni.CNIReply, error) {
	return s.p.call(ctx, methodCheck, func(context.Context) (*cni.CNIReply, error) {
		at, err := parseRequest(req)
		if err != nil {
			return nil, err
		}
		return okReply(), s.p.check(at.key, req.GetPrevIps())
	})
}

// GC releases every allocation of the network that is not listed.
func (s *server) GC(ctx context.Context, req *cni.GCRequest) (*cni.CNIReply, error) {
	return s.p.call(ctx, methodGC, func(ctx context.Context) (*cni.CNIReply, error) {
		ev, err := gcRequest(req)
		if err != nil {
			return nil, err
		}
		return okReply(), s.p.pushAndWait(ctx, ev)
	})
}

// Status tells whether an Add can get an address.
func (s *server) Status(ctx context.Context, _ *cni.StatusRequest) (*cni.CNIReply, error) {
	return s.p.call(ctx, methodStatus, func(context.Context) (*cni.CNIReply, error) {
		return okReply(), s.p.status()
	})
}

// Confirm confirms the reservation of an Add: see the package doc.
func (s *server) Confirm(ctx context.Context, req *cni.ConfirmRequest) (*cni.CNIReply, error) {
	return s.p.call(ctx, methodConfirm, func(ctx context.Context) (*cni.CNIReply, error) {
		key, reservation, err := confirmRequest(req)
		if err != nil {
			return nil, err
		}
		return okReply(), s.p.confirm(ctx, key, reservation)
	})
}

func okReply() *cni.CNIReply { return &cni.CNIReply{Result: cni.CNIReply_OK} }

// call runs f with the call's context bounded by requestTimeout and by the
// plugin's life, turns its error into an ERROR reply, logs and counts it.
// The gRPC error is always nil: every outcome is a CNIReply.
func (p *Plugin) call(ctx context.Context, method string, f func(context.Context) (*cni.CNIReply, error)) (*cni.CNIReply, error) {
	start := time.Now()
	timeoutErr := fmt.Errorf("the agent did not answer within %s (requestTimeout): %w", p.cfg.RequestTimeout, context.DeadlineExceeded)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, p.cfg.RequestTimeout, timeoutErr)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(p.life, func() { cancel(errShuttingDown) })
	defer stop()

	reply, err := f(ctx)
	if err != nil {
		reply = errorReply(fmt.Errorf("%s: %w", method, err))
		p.logFailure(method, reply)
	}
	p.metrics.observe(method, reply.GetErrorCode(), time.Since(start))
	return reply, nil
}

// logFailure logs an ERROR reply: agent failures as warnings, the rest
// (bad requests, try again, check failures) at info.
func (p *Plugin) logFailure(method string, reply *cni.CNIReply) {
	if reply.GetErrorCode() == cni.CodeInternal {
		p.Log.Warn("CNI call failed", "method", method, "code", reply.GetErrorCode(), "error", reply.GetError())
		return
	}
	p.Log.Info("CNI call refused", "method", method, "code", reply.GetErrorCode(), "error", reply.GetError())
}

// add pushes the AddPod of at, deleting an obsolete container of the same
// pod first, and builds the reply once the allocation is durable.
func (p *Plugin) add(ctx context.Context, at attachment, req *cni.CNIRequest) (*cni.CNIReply, error) {
	for round := 1; ; round++ {
		if err := p.deleteObsolete(ctx, at); err != nil {
			return nil, err
		}
		ev := NewAddPod()
		ev.Pod, ev.PodUID, ev.Key, ev.NetworkNamespace = at.pod, at.uid, at.key, at.netns
		ev.IPAMType, ev.IPAMData = req.GetIpamType(), req.GetIpamData()
		ev.Confirms, ev.Ctx = req.GetConfirms(), ctx
		err := p.pushAndWait(ctx, ev)
		if errors.Is(err, errObsoletePod) && round < maxObsoleteRounds {
			continue // another container of the pod was recorded meanwhile
		}
		if err != nil {
			return nil, err
		}
		return addReply(ev)
	}
}

// deleteObsolete deletes every attachment of at's pod when the pod is
// recorded with another container (Contiv's obsolete pod configuration).
func (p *Plugin) deleteObsolete(ctx context.Context, at attachment) error {
	old, ok := p.pods.get(at.pod)
	if !ok || old.ContainerID == at.key.ContainerID {
		return nil
	}
	if ReusedName(old.UID, at.uid) {
		p.Log.Info("a pod re-created under the name of a connected one: the old one keeps its addresses until its own DEL",
			"pod", at.pod.String(), "old-uid", old.UID, "uid", at.uid, "old-container", old.ContainerID, "new-container", at.key.ContainerID)
		return nil
	}
	p.Log.Info("obsolete pod configuration: deleting the old container first",
		"pod", at.pod.String(), "old-container", old.ContainerID, "new-container", at.key.ContainerID)
	for _, key := range slices.Clone(old.Attachments) {
		if err := p.deletePod(ctx, old.ID, key, old.NetworkNamespace); err != nil {
			return fmt.Errorf("deleting the obsolete container %q of pod %s: %w", old.ContainerID, old.ID, err)
		}
	}
	return nil
}

// deletePod pushes one DeletePod and waits for its release to be durable.
func (p *Plugin) deletePod(ctx context.Context, pod podmodel.ID, key AttachmentKey, netns string) error {
	ev := NewDeletePod()
	ev.Pod, ev.Key, ev.NetworkNamespace, ev.Ctx = pod, key, netns, ctx
	return p.pushAndWait(ctx, ev)
}

// pushAndWait pushes the blocking ev, waits until the loop has processed
// it, then for the Pendings its handlers added (the durable writes). ctx
// bounds both waits. PushEvent of a blocking event returns the event's
// outcome (the loop also calls Done), so the push runs in a goroutine that
// lives until the loop processes or drops the event (at the latest when
// the loop closes) and ctx decides how long the caller waits.
func (p *Plugin) pushAndWait(ctx context.Context, ev blockingEvent) error {
	pushed := make(chan error, 1)
	go func() { pushed <- p.EventLoop.PushEvent(ev) }()
	select {
	case err := <-pushed:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", ev.GetName(), context.Cause(ctx))
	}
	if err := ev.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx) // the Pendings return ctx.Err()
		}
		return fmt.Errorf("%s: the change is not durable: %w", ev.GetName(), err)
	}
	return nil
}

// check answers CHECK from IPAM's allocations.
func (p *Plugin) check(key AttachmentKey, prevIPs []string) error {
	prev, err := prevAddresses(prevIPs)
	if err != nil {
		return err
	}
	if p.IPAM == nil {
		return errors.New("the agent has no IPAM to check allocations with")
	}
	held, ok, err := p.IPAM.AttachmentIPs(key)
	if err != nil {
		return fmt.Errorf("reading the allocation of %s: %w", key, err)
	}
	if !ok {
		return fmt.Errorf("%w: no allocation for %s", errCheckFailed, key)
	}
	for _, h := range held { // dual-stack: every family's address
		if len(prev) > 0 && !slices.Contains(prev, h.Addr().Unmap()) {
			return fmt.Errorf("%w: %s holds %s, prevResult has %v", errCheckFailed, key, h.Addr(), prevIPs)
		}
	}
	return nil
}

// confirm asks IPAM to confirm the key's reservation, outside the event
// loop: IPAM orders it with its allocations and releases itself. A
// context that ends is reported by its cause (requestTimeout, shutdown:
// code 11), as pushAndWait does.
func (p *Plugin) confirm(ctx context.Context, key AttachmentKey, reservation string) error {
	if p.IPAM == nil {
		return errors.New("the agent has no IPAM to confirm reservations with")
	}
	err := p.IPAM.ConfirmAttachment(ctx, key, reservation)
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		err = context.Cause(ctx)
	}
	return fmt.Errorf("reservation %q of %s: %w", reservation, key, err)
}

// status answers STATUS from IPAM's free addresses.
func (p *Plugin) status() error {
	if p.IPAM == nil {
		return fmt.Errorf("%w: no IPAM is wired", errNotAvailable)
	}
	free, err := p.IPAM.FreeAddresses()
	if err != nil {
		return fmt.Errorf("%w: %w", errNotAvailable, err)
	}
	if free == 0 {
		return fmt.Errorf("%w: no IP address is free in the pod subnet", errNotAvailable)
	}
	return nil
}
