package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// addPod allocates the address of ev.Key for ev.Pod and fills the reply:
// one interface (ev.Key.IfName in ev.NetworkNamespace) with the address
// at the pod subnet's prefix length and the pod gateway, and a default
// route via the gateway. The CNI reply waits (ev.Await) for the
// allocation's record to be durable.
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
	dec, final := p.keeper.submit(&request{kind: reqAllocate, pod: ev.Pod, key: ev.Key, data: ev.IPAMData})
	if dec.err != nil {
		return "", p.cniError(dec.err)
	}
	st := p.st.Load()
	if st == nil || !st.podThis.Contains(dec.addr) {
		return "", fmt.Errorf("%w: the pod subnet changed while %s was allocated", podmanager.ErrTryAgain, ev.Key)
	}
	ev.Interfaces = []podmanager.PodInterface{{Name: ev.Key.IfName, Sandbox: ev.NetworkNamespace,
		IPAddresses: []podmanager.IPWithGateway{{Address: netip.PrefixFrom(dec.addr, st.podThis.Bits()), Gateway: st.podGW}}}}
	ev.Routes = []podmanager.Route{{Dst: defaultRoute(dec.addr), Gw: st.podGW}}
	ev.Await(func(ctx context.Context) error { return p.cniError(final(ctx).err) })
	return fmt.Sprintf("%s: %s", ev.Key, dec.addr), nil
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
	dec, final := p.keeper.submit(&request{kind: reqRelease, pod: ev.Pod, key: ev.Key})
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
// list; pod-keyed allocations are untouched. The CNI reply waits for the
// deletes to be durable.
func (p *Plugin) gcPods(ev *podmanager.GCPods) (string, error) {
	if ev.Network == "" {
		return "", fmt.Errorf("GC: the network name is empty: %w", podmanager.ErrBadRequest)
	}
	dec, final := p.keeper.submit(&request{kind: reqGC, gc: newGCInput(ev)})
	if dec.err != nil {
		return "", p.cniError(dec.err)
	}
	ev.Await(func(ctx context.Context) error { return p.cniError(final(ctx).err) })
	if !dec.held {
		return "", nil
	}
	return fmt.Sprintf("GC of network %q released attachments", ev.Network), nil
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
