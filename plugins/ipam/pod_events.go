package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// addPod allocates the addresses of ev.Key for ev.Pod (one per family of
// the node) and fills the reply: one interface (ev.Key.IfName in
// ev.NetworkNamespace) with each address at its pod subnet's prefix
// length and its pod gateway, and a default route of each family via its
// gateway. When the client confirms (ev.Confirms) and
// cniReservationTimeout is set, the addresses are an expiring
// reservation whose ID is ev.Reservation. The CNI reply waits
// (ev.Await) for the allocation's record to be durable.
func (p *Plugin) addPod(ev *podmanager.AddPod) (string, error) {
	if err := keeper.CheckAttachment(ev.Key); err != nil {
		return "", err
	}
	if err := keeper.CheckPodID(ev.Pod); err != nil {
		return "", fmt.Errorf("%w: %w", podmanager.ErrBadRequest, err)
	}
	if err := p.checkNodeID(); err != nil {
		p.metrics.keeper.FailedAllocations().Inc()
		return "", err
	}
	req := &keeper.Request{Kind: keeper.ReqAllocate, Pod: ev.Pod, UID: ev.PodUID, Key: ev.Key, Data: ev.IPAMData, Ctx: ev.Ctx, MayRefuse: true}
	if ev.Confirms && !p.externalIPAM() {
		req.Timeout = p.cfg.CNIReservationTimeout
	}
	dec, final := p.keeper.Submit(req)
	if dec.Err != nil {
		return "", p.cniError(dec.Err)
	}
	iface := podmanager.PodInterface{Name: ev.Key.IfName, Sandbox: ev.NetworkNamespace}
	ev.Routes = nil
	for i, a := range dec.Addrs {
		if !a.IsValid() {
			continue
		}
		if !dec.Nets[i].Contains(a) {
			return "", fmt.Errorf("%w: the pod subnet changed while %s was allocated", podmanager.ErrTryAgain, ev.Key)
		}
		iface.IPAddresses = append(iface.IPAddresses, podmanager.IPWithGateway{Address: netip.PrefixFrom(a, dec.Nets[i].Bits()), Gateway: dec.Gws[i]})
		ev.Routes = append(ev.Routes, podmanager.Route{Dst: defaultRoute(a), Gw: dec.Gws[i]})
	}
	ev.Interfaces = []podmanager.PodInterface{iface}
	ev.Reservation = dec.Resv
	ev.Await(func(ctx context.Context) error { return p.cniError(final(ctx).Err) })
	return fmt.Sprintf("%s: %s", ev.Key, dec.Addrs), nil
}

// defaultRoute is 0.0.0.0/0 or ::/0, the family of a.
func defaultRoute(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
}

// deletePod releases the address of ev.Key (not the pod's other
// attachments, never a pod-keyed allocation); an unknown key releases
// nothing and succeeds. The CNI reply waits for the delete to be durable.
func (p *Plugin) deletePod(ev *podmanager.DeletePod) (string, error) {
	if err := keeper.CheckAttachment(ev.Key); err != nil {
		return "", err
	}
	dec, final := p.keeper.Submit(&keeper.Request{Kind: keeper.ReqRelease, Pod: ev.Pod, Key: ev.Key, Ctx: ev.Ctx, MayRefuse: true})
	if dec.Err != nil {
		return "", p.cniError(dec.Err)
	}
	ev.Await(func(ctx context.Context) error { return p.cniError(final(ctx).Err) })
	if !dec.Held {
		return "", nil
	}
	return fmt.Sprintf("released %s of %s", dec.Addr, ev.Key), nil
}

// revertAddPod releases what addPod allocated (a later handler failed).
func (p *Plugin) revertAddPod(ev *podmanager.AddPod) error {
	if keeper.CheckAttachment(ev.Key) != nil {
		return nil // addPod refused it: nothing to undo
	}
	rep := p.keeper.Do(&keeper.Request{Kind: keeper.ReqRelease, Pod: ev.Pod, Key: ev.Key})
	return p.cniError(rep.Err)
}

// gcPods releases every attachment of ev.Network that ev.Valid does not
// list; pod-keyed allocations are untouched. It returns once the deletes
// are durable (a GC is a barrier: see keeper.gc).
func (p *Plugin) gcPods(ev *podmanager.GCPods) (string, error) {
	if ev.Network == "" {
		return "", fmt.Errorf("GC: the network name is empty: %w", podmanager.ErrBadRequest)
	}
	released, ready, gcErr := p.keeper.GC(keeper.NewGCInput(ev))
	switch {
	case !ready && gcErr == nil:
		return "", p.notReadyTryAgain()
	case !ready:
		return "", p.cniError(gcErr)
	case gcErr != nil:
		return "", fmt.Errorf("GC of network %q: %d attachments released, others not: %w", ev.Network, released, gcErr)
	case released == 0:
		return "", nil
	}
	return fmt.Sprintf("GC of network %q released %d attachments", ev.Network, released), nil
}

// cniError makes "not ready" an error podmanager answers with "try again
// later"; other errors keep their wrapping (ipalloc.ErrPoolExhausted,
// podmanager.ErrBadRequest).
func (p *Plugin) cniError(err error) error {
	if errors.Is(err, keeper.ErrNotReady) || errors.Is(err, keeper.ErrNotStarted) || errors.Is(err, keeper.ErrClosed) {
		if errors.Is(err, keeper.ErrNotReady) {
			err = p.notReady()
		}
		return fmt.Errorf("%w: %w", podmanager.ErrTryAgain, err)
	}
	return err
}
