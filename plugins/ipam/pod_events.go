package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

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
	if err := checkAttachment(ev.Key); err != nil {
		return "", err
	}
	if err := checkPodID(ev.Pod); err != nil {
		return "", fmt.Errorf("%w: %w", podmanager.ErrBadRequest, err)
	}
	if err := p.checkNodeID(); err != nil {
		p.metrics.failed.Inc()
		return "", err
	}
	req := &request{kind: reqAllocate, pod: ev.Pod, key: ev.Key, data: ev.IPAMData, ctx: ev.Ctx, mayRefuse: true}
	if ev.Confirms && !p.externalIPAM() {
		req.timeout = p.cfg.CNIReservationTimeout
	}
	dec, final := p.keeper.submit(req)
	if dec.err != nil {
		return "", p.cniError(dec.err)
	}
	iface := podmanager.PodInterface{Name: ev.Key.IfName, Sandbox: ev.NetworkNamespace}
	ev.Routes = nil
	for i, a := range dec.addrs {
		if !a.IsValid() {
			continue
		}
		if !dec.nets[i].Contains(a) {
			return "", fmt.Errorf("%w: the pod subnet changed while %s was allocated", podmanager.ErrTryAgain, ev.Key)
		}
		iface.IPAddresses = append(iface.IPAddresses, podmanager.IPWithGateway{Address: netip.PrefixFrom(a, dec.nets[i].Bits()), Gateway: dec.gws[i]})
		ev.Routes = append(ev.Routes, podmanager.Route{Dst: defaultRoute(a), Gw: dec.gws[i]})
	}
	ev.Interfaces = []podmanager.PodInterface{iface}
	ev.Reservation = dec.resv
	ev.Await(func(ctx context.Context) error { return p.cniError(final(ctx).err) })
	return fmt.Sprintf("%s: %s", ev.Key, dec.addrs), nil
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
	if err := checkAttachment(ev.Key); err != nil {
		return "", err
	}
	dec, final := p.keeper.submit(&request{kind: reqRelease, pod: ev.Pod, key: ev.Key, ctx: ev.Ctx, mayRefuse: true})
	if dec.err != nil {
		return "", p.cniError(dec.err)
	}
	ev.Await(func(ctx context.Context) error { return p.cniError(final(ctx).err) })
	if !dec.held {
		return "", nil
	}
	return fmt.Sprintf("released %s of %s", dec.addr, ev.Key), nil
}

// revertAddPod releases what addPod allocated (a later handler failed).
func (p *Plugin) revertAddPod(ev *podmanager.AddPod) error {
	if checkAttachment(ev.Key) != nil {
		return nil // addPod refused it: nothing to undo
	}
	rep := p.keeper.do(&request{kind: reqRelease, pod: ev.Pod, key: ev.Key})
	return p.cniError(rep.err)
}

// gcPods releases every attachment of ev.Network that ev.Valid does not
// list; pod-keyed allocations are untouched. It returns once the deletes
// are durable (a GC is a barrier: see keeper.gc).
func (p *Plugin) gcPods(ev *podmanager.GCPods) (string, error) {
	if ev.Network == "" {
		return "", fmt.Errorf("GC: the network name is empty: %w", podmanager.ErrBadRequest)
	}
	in := newGCInput(ev)
	var released int
	var gcErr error
	ran := false
	rep := p.keeper.do(&request{kind: reqRead, read: func(t *table) {
		ran = true
		released, gcErr = p.keeper.gc(t, in)
	}})
	switch {
	case rep.err != nil:
		return "", p.cniError(rep.err)
	case !ran:
		return "", p.notReadyTryAgain()
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
	if errors.Is(err, errNotReady) || errors.Is(err, errNotStarted) || errors.Is(err, errClosed) {
		if errors.Is(err, errNotReady) {
			err = p.notReady()
		}
		return fmt.Errorf("%w: %w", podmanager.ErrTryAgain, err)
	}
	return err
}
