package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strings"

	"github.com/contiv-ipam/agent/plugins/ipam/addressing"
	podmodel "github.com/contiv-ipam/agent/plugins/ksr/model/pod"
	"github.com/contiv-ipam/agent/plugins/podmanager"
)

// AllocationPrefix is the bolt key prefix of the pod allocations:
// AllocationPrefix + "<namespace>/<name>" -> the address.
const AllocationPrefix = "/contiv-agent/ipam/pods/"

// AllocatePodIP implements API. It returns once the pod's record is
// durable in the local store; concurrent calls share one write.
func (p *Plugin) AllocatePodIP(podID podmodel.ID, ipamType, ipamData string) (net.IP, error) {
	if err := checkPodID(podID); err != nil {
		return nil, err
	}
	if err := p.checkNodeID(); err != nil {
		p.metrics.failed.Inc()
		return nil, err
	}
	rep := p.keeper.do(&request{kind: reqAllocate, pod: podID, data: ipamData, mayRefuse: true})
	if errors.Is(rep.err, errNotReady) {
		return nil, p.notReady()
	}
	if rep.err != nil {
		return nil, rep.err
	}
	if p.Log.Enabled(context.Background(), slog.LevelDebug) {
		p.Log.Debug("pod IP allocated", "pod", podID.String(), "ip", rep.addr.String(), "ipam-type", ipamType)
	}
	return addressing.ToIP(rep.addr), nil
}

// ErrNodeIDLost: nodesync no longer reports the node ID the pod subnet
// was cut with (another node took it); no address is handed out, since it
// could be another node's.
var ErrNodeIDLost = errors.New("this node no longer holds the node ID its pod subnet was cut with")

// checkNodeID refuses to serve addresses of a node ID this node lost.
func (p *Plugin) checkNodeID() error {
	st := p.st.Load()
	if st == nil {
		return nil // the keeper answers errNotReady
	}
	if now := p.NodeSync.GetNodeID(); now != st.NodeID {
		return fmt.Errorf("pod subnet %s of node ID %d (nodesync reports %d): %w", st.PodThis, st.NodeID, now, ErrNodeIDLost)
	}
	return nil
}

// checkPodID refuses IDs that cannot be a Kubernetes pod's.
func checkPodID(id podmodel.ID) error {
	if id.Name == "" || id.Namespace == "" || strings.Contains(id.Name, "/") || strings.Contains(id.Namespace, "/") {
		return fmt.Errorf("pod ID %q: want a name and a namespace without '/'", id.String())
	}
	return nil
}

// ReleasePodIP implements API: every allocation of the pod (pod-keyed and
// attachment-keyed) is released. It returns once the records are deleted;
// only then are the addresses free for another pod.
func (p *Plugin) ReleasePodIP(podID podmodel.ID) error {
	return p.keeper.do(&request{kind: reqRelease, pod: podID, mayRefuse: true}).err
}

// GetPodIP implements API: the pod's address (the one of interface eth0
// when it has several attachments, else the lowest).
func (p *Plugin) GetPodIP(podID podmodel.ID) (n *net.IPNet) {
	p.keeper.read(func(t *table) {
		if _, a, ok := t.podAddr(podID); ok {
			n = &net.IPNet{IP: addressing.ToIP(a), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
		}
	})
	return n
}

// GetPodFromIP implements API.
func (p *Plugin) GetPodFromIP(podIP net.IP) (id podmodel.ID, found bool) {
	a, ok := addressing.ToAddr(podIP)
	if !ok {
		return id, false
	}
	p.keeper.read(func(t *table) {
		var key allocKey
		if key, found = t.owner(a); found {
			id = t.podOf(key)
		}
	})
	return id, found
}

// AttachmentIPs implements podmanager.IPAM: the addresses of the
// attachment (one per family), each with its pod subnet's prefix length.
func (p *Plugin) AttachmentIPs(key podmanager.AttachmentKey) (pfxs []netip.Prefix, found bool, err error) {
	err = p.notReadyTryAgain()
	p.keeper.read(func(t *table) {
		err = nil
		as, ok := t.lookupAll(attKeyOf(key))
		if !ok {
			return
		}
		found = true
		for _, a := range as {
			if b, _, ok := t.blockOf(a); ok {
				pfxs = append(pfxs, netip.PrefixFrom(a, b.prefix.Bits()))
			}
		}
	})
	return pfxs, found, err
}

// FreeAddresses implements podmanager.IPAM: the free addresses of the pod
// pool; with an external IPAM, which hands out the addresses,
// math.MaxUint64.
func (p *Plugin) FreeAddresses() (free uint64, err error) {
	err = p.notReadyTryAgain()
	p.keeper.read(func(t *table) {
		err = nil
		free = math.MaxUint64
		if !t.externalMode() {
			free = t.servable(0)
			for i := 1; i < t.slots(); i++ {
				free = min(free, t.servable(i)) // a pod takes one of each
			}
		}
	})
	return free, err
}

// notReadyTryAgain is the error of a call made before IPAM has a pod
// subnet: podmanager answers it with "try again later".
func (p *Plugin) notReadyTryAgain() error {
	return fmt.Errorf("%w: %w", podmanager.ErrTryAgain, p.notReady())
}

// allocation is one held allocation, for the REST API.
type allocation struct {
	key   allocKey
	pod   podmodel.ID
	addrs addrs
	resv  *reservation
}

// allocationList lists the held addresses.
func (p *Plugin) allocationList() []allocation {
	var out []allocation
	p.keeper.read(func(t *table) {
		t.each(func(key allocKey, pod podmodel.ID, as addrs) bool {
			al := allocation{key: key, pod: pod, addrs: as}
			if rv, ok := t.resv[key]; ok {
				al.resv = &rv
			}
			out = append(out, al)
			return true
		})
	})
	return out
}
