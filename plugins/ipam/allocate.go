package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	"github.com/contiv-ipam/agent/plugins/ipam/keeper"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// AllocatePodIP implements API. It returns once the pod's record is
// durable in the local store; concurrent calls share one write.
func (p *Plugin) AllocatePodIP(podID podmodel.ID, ipamType, ipamData string) (net.IP, error) {
	if err := keeper.CheckPodID(podID); err != nil {
		return nil, err
	}
	if err := p.checkNodeID(); err != nil {
		p.metrics.keeper.FailedAllocations().Inc()
		return nil, err
	}
	rep := p.keeper.Do(&keeper.Request{Kind: keeper.ReqAllocate, Pod: podID, Data: ipamData, MayRefuse: true})
	if errors.Is(rep.Err, keeper.ErrNotReady) {
		return nil, p.notReady()
	}
	if rep.Err != nil {
		return nil, rep.Err
	}
	if p.Log.Enabled(context.Background(), slog.LevelDebug) {
		p.Log.Debug("pod IP allocated", "pod", podID.String(), "ip", rep.Addr.String(), "ipam-type", ipamType)
	}
	return addressing.ToIP(rep.Addr), nil
}

// ErrNodeIDLost: nodesync no longer reports the node ID the pod subnet
// was cut with (another node took it); no address is handed out, since it
// could be another node's.
var ErrNodeIDLost = errors.New("this node no longer holds the node ID its pod subnet was cut with")

// checkNodeID refuses to serve addresses of a node ID this node lost.
func (p *Plugin) checkNodeID() error {
	st := p.st.Load()
	if st == nil {
		return nil // the keeper answers keeper.ErrNotReady
	}
	if now := p.NodeSync.GetNodeID(); now != st.NodeID {
		return fmt.Errorf("pod subnet %s of node ID %d (nodesync reports %d): %w", st.PodThis, st.NodeID, now, ErrNodeIDLost)
	}
	return nil
}

// ReleasePodIP implements API: every allocation of the pod (pod-keyed and
// attachment-keyed) is released. It returns once the records are deleted;
// only then are the addresses free for another pod.
func (p *Plugin) ReleasePodIP(podID podmodel.ID) error {
	return p.keeper.Do(&keeper.Request{Kind: keeper.ReqRelease, Pod: podID, MayRefuse: true}).Err
}

// GetPodIP implements API: the pod's address (the one of interface eth0
// when it has several attachments, else the lowest).
func (p *Plugin) GetPodIP(podID podmodel.ID) *net.IPNet {
	a, ok := p.keeper.PodAddr(podID)
	if !ok {
		return nil
	}
	return &net.IPNet{IP: addressing.ToIP(a), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

// GetPodFromIP implements API.
func (p *Plugin) GetPodFromIP(podIP net.IP) (podmodel.ID, bool) {
	a, ok := addressing.ToAddr(podIP)
	if !ok {
		return podmodel.ID{}, false
	}
	return p.keeper.PodOf(a)
}

// AttachmentIPs implements podmanager.IPAM: the addresses of the
// attachment (one per family), each with its pod subnet's prefix length.
func (p *Plugin) AttachmentIPs(key podmanager.AttachmentKey) ([]netip.Prefix, bool, error) {
	pfxs, found, ready := p.keeper.AttachmentPrefixes(key)
	if !ready {
		return nil, false, p.notReadyTryAgain()
	}
	return pfxs, found, nil
}

// FreeAddresses implements podmanager.IPAM: the free addresses of the pod
// pool; with an external IPAM, which hands out the addresses,
// math.MaxUint64.
func (p *Plugin) FreeAddresses() (uint64, error) {
	free, ready := p.keeper.Servable()
	if !ready {
		return 0, p.notReadyTryAgain()
	}
	return free, nil
}

// notReadyTryAgain is the error of a call made before IPAM has a pod
// subnet: podmanager answers it with "try again later".
func (p *Plugin) notReadyTryAgain() error {
	return fmt.Errorf("%w: %w", podmanager.ErrTryAgain, p.notReady())
}
